// Package storage hands an ingested object to preservation storage, which
// keeps it as numbered versions (v1, v2, …) of one ARK.
//
// A [Store] is what the Storing step calls. [Store.Put] is idempotent by
// content: when the object's files (names, sizes and SHA-256 digests) equal
// the latest version's, no version is made and the latest comes back with
// Changed false. So a Put run again after a crash, even one that struck after
// the version was written but before the caller heard of it, never makes a
// second version.
//
// The daemon keeps a folder or an S3 bucket as OCFL (package ocfl). This
// package has two more stores:
//
//   - [HTTP] speaks to a storage service: one streamed multipart POST per
//     Put (rebuilt from the files on each retry), one GET per Latest; for
//     an audit ([Surveyor]) and the access queue ([Reader]), one GET of
//     every version and one per file read back.
//     A 4xx answer is a refusal ([Refused]); retrying cannot fix it.
//   - [Local], the store ingestq kept before OCFL: dir/<ark>/v0001/<files>
//     with a version.json beside them. A daemon imports such a folder into
//     its OCFL root (ocfl.Import) and stores nothing new in it; [NewServer]
//     serves a Local as a storage service, for tests. A version is written
//     into a temporary folder, verified against its digests, synced, and
//     renamed into place, so it either exists whole or not at all.
//
// Both are safe for concurrent use by goroutines working on different ARKs.
package storage
