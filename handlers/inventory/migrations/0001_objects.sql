-- Objects, their versions and files, and the local ids that name them.
-- Text is compared byte for byte (the inventory sorts in Go).

CREATE TABLE objects (
    ark            text PRIMARY KEY,
    profile        text NOT NULL,
    latest_version integer NOT NULL,
    -- the ERC of the latest version
    who            text NOT NULL,
    what           text NOT NULL,
    "when"         text NOT NULL,
    "where"        text NOT NULL
);

CREATE TABLE versions (
    ark       text NOT NULL REFERENCES objects (ark),
    version   integer NOT NULL CHECK (version BETWEEN 1 AND 99999999),
    created   timestamptz NOT NULL,
    local_ids text[] NOT NULL, -- as the record gave them: part of its content
    batch     text NOT NULL,   -- where the record came from
    job       text NOT NULL,
    who       text NOT NULL,
    what      text NOT NULL,
    "when"    text NOT NULL,
    "where"   text NOT NULL,
    PRIMARY KEY (ark, version)
);

CREATE TABLE files (
    ark     text NOT NULL,
    version integer NOT NULL,
    name    text NOT NULL,
    size    bigint NOT NULL CHECK (size >= 0),
    sha256  text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    PRIMARY KEY (ark, version, name),
    FOREIGN KEY (ark, version) REFERENCES versions
);

-- A local id names one object within a profile: the primary key decides
-- between two records claiming it at once.
CREATE TABLE local_ids (
    profile  text NOT NULL,
    local_id text NOT NULL,
    ark      text NOT NULL REFERENCES objects (ark),
    PRIMARY KEY (profile, local_id)
);
CREATE INDEX local_ids_ark ON local_ids (ark);
