// Package inventory records stored versions in the inventory database: which
// objects exist, their versions and files, the verified copies of each
// version (replicas), its PREMIS events, and which local ids map to which
// ARK within a profile (collection).
//
// An [Inventory] is what the Recording step calls, what the Processing step
// asks for a local id's ARK, what `ingestq object` reads
// ([Inventory.Object], [ObjectByLocalID]), and what an audit walks a page at
// a time, in bytewise ARK order ([Inventory.List], [Objects]).
// [Inventory.Record] is idempotent: a version recorded again changes
// nothing, so Recording can run again after a crash. What makes two records
// of one (ARK, version) "the same" is their content: profile, local ids (as
// a set) and files (name, size, digest). Replicas and events are not
// content: a record of a recorded version adds the replicas (by target) and
// events (by id) the version lacks, and what was recorded first stays. The
// rest (batch, job, created, ERC) tells where a record came from; when it
// differs the first record stays. Different content for a recorded version
// is an error ([ErrMismatch]); so is a local id already mapped to another
// ARK in the profile ([ErrConflict]), and a record no inventory can keep
// ([ErrInvalid]: an empty ARK, a bad digest, a string with a NUL or not
// UTF-8, an event type outside the PREMIS labels ingest uses, …). Every
// implementation keeps times in UTC to the microsecond and gives back the
// same records; one conformance suite runs against all three.
//
// [Refused] tells the errors trying again cannot change (ErrMismatch,
// ErrInvalid, a service's 4xx); ErrConflict is its own. Every other error
// (a database or service out of reach: [ErrUnavailable] for PostgreSQL, a
// 5xx) may pass, and the pipeline tries again.
//
// Three inventories are built in; [Open] picks one from a URL:
//
//   - [Local], an embedded bbolt database, one file, with three buckets:
//     objects (ARK → object row), versions (ARK NUL %08d version → record,
//     with its replicas and events) and localids (profile NUL local id →
//     ARK). Each Record is one transaction, so a crash leaves all of it or
//     none. The file is locked by the process that opens it; a second
//     process gets [ErrLocked] after a short wait instead of hanging. The
//     default for one host.
//   - [Postgres], a PostgreSQL database shared by every host (pgx, one
//     pool): tables objects, versions, files, local_ids, replicas and events.
//     [NewPostgres] applies the schema migrations the database lacks
//     (migrations/NNNN_name.sql, embedded; each in its own transaction under
//     an advisory lock, entered in schema_migrations), so daemons starting
//     at once apply each once. Each Record is one transaction: it locks the
//     object's row first (records of one ARK take turns, from any host) and
//     claims local ids in sorted order (records of different ARKs never
//     deadlock; the local_ids primary key decides who gets an id);
//     RecordVersions, one transaction of several, records them in the
//     order of their ARKs, so that it locks their rows in one order. A call
//     that finds the database out of reach is tried again twice, then
//     fails with ErrUnavailable; one that gets no answer within its time
//     limit fails with it at once. A page of objects is one statement, in
//     bytewise order whatever the database's locale (COLLATE "C", served
//     by an index of its own).
//   - [HTTP], a client of an inventory service (POST /records, GET
//     /localids/<profile>/<local id>, GET /objects/<ark>, with
//     ?versions=latest for the latest version alone, GET
//     /objects?after=<ark>&limit=<n> for a page of at most [MaxPage]
//     objects). A 409 is ErrConflict, a 422 ErrMismatch, a 400 ErrInvalid;
//     every 4xx but 409 is a refusal. 5xx answers and network errors are
//     retried by the client. [NewServer] serves any Inventory over the same
//     protocol.
package inventory
