// Package inventory records stored versions in the inventory database: which
// objects exist, their versions and files, and which local ids map to which
// ARK within a profile (collection).
//
// An [Inventory] is what the Recording step calls and what the Processing
// step asks for a local id's ARK. [Inventory.Record] is idempotent: a
// version recorded again changes nothing, so Recording can run again after a
// crash. What makes two records of one (ARK, version) "the same" is their
// content: profile, local ids (as a set) and files (name, size, digest). The
// rest (batch, job, created, ERC) tells where a record came from; when it
// differs the first record stays. Different content for a recorded version
// is an error ([ErrMismatch]); so is a local id already mapped to another
// ARK in the profile ([ErrConflict]).
//
// Two inventories are built in:
//
//   - [Local], an embedded bbolt database, one file, with three buckets:
//     objects (ARK → object row), versions (ARK NUL %08d version → record)
//     and localids (profile NUL local id → ARK). Each Record is one
//     transaction, so a crash leaves all of it or none. The file is locked
//     by the process that opens it; a second process gets [ErrLocked]
//     after a short wait instead of hanging.
//   - [HTTP], a client of an inventory service (POST /records, GET
//     /localids/<profile>/<local id>). A 4xx other than 409 is a refusal
//     ([Refused]); 5xx answers and network errors are retried by the client.
package inventory
