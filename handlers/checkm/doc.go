// Package checkm reads Merritt ingest manifests: checkm 0.7 files with one
// of Merritt's four profiles.
//
//	#%checkm_0.7
//	#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest
//	#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#
//	#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileName
//	http://example.org/a.txt | md5 | 0cc175b9c0f1b6a831c399e269772661 | 1 | a.txt
//	#%eof
//
// # Profiles
//
// In an [IngestManifest] each line is a file of one object. In the three
// batch profiles each line is an object: an object manifest
// ([BatchManifest]), a single file ([SingleFileBatch]) or a zip container
// ([ContainerBatch]), with optional per-object fields (mrt:primaryIdentifier,
// mrt:localIdentifier, and the ERC who/what/when/where).
//
// # How strict
//
// Parse is strict where a mistake would ingest the wrong thing, and lenient
// where nothing can go wrong:
//
//   - The first non-blank line must be #%checkm_0.7 and a #%profile line must
//     come before the first entry; guessing a profile could read a batch as
//     one object.
//   - #%profile, #%prefix and #%fields must come before the first entry, and
//     each of #%checkm, #%profile and #%fields at most once.
//   - Columns follow #%fields (any order; unknown fields are ignored), or the
//     checkm default order without it. A line may leave out trailing columns
//     (they are empty); extra columns must be empty.
//   - Field names are matched by namespace (through #%prefix, with the usual
//     mrt: and nfo: when undeclared) and local name, ignoring case.
//   - Unknown #% directives and "#" comments are skipped.
//   - #%eof is required: without it the manifest is truncated. After it only
//     blank lines may follow.
//   - Every error is a [*LineError] naming the source and the line; duplicate
//     files or objects name both lines.
//
// Input is bounded by [Limits]: line length, number of entries and total
// size, so hostile input never makes Parse allocate without limit.
package checkm
