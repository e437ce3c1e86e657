-- The verified copies of each version, and its PREMIS events.

CREATE TABLE replicas (
    ark      text NOT NULL,
    version  integer NOT NULL,
    target   text NOT NULL, -- the storage target, as the profile names it
    url      text NOT NULL, -- where the copy is
    verified timestamptz NOT NULL,
    PRIMARY KEY (ark, version, target),
    FOREIGN KEY (ark, version) REFERENCES versions
);

CREATE TABLE events (
    ark     text NOT NULL,
    version integer NOT NULL,
    id      uuid NOT NULL,
    type    text NOT NULL CHECK (type IN ('ingestion', 'message digest calculation', 'fixity check',
                                          'identifier assignment', 'replication')),
    at      timestamptz NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('success', 'failure')),
    agent   text NOT NULL,
    detail  text NOT NULL,
    file    text NOT NULL, -- '' when the event is about the whole version
    PRIMARY KEY (ark, version, id),
    FOREIGN KEY (ark, version) REFERENCES versions
);
