// Package handlers is ingestq's ingest pipeline: the work each state does,
// plugged into the reactor.
//
//	batch Pending   fetch the payload, recognise it (file, zip, checkm manifest
//	                of one of Merritt's four profiles) and make one job per object
//	Estimating      space_needed from each file's size (the manifest's, else a
//	                HEAD); a later priority for big jobs
//	Provisioning    wait until the working storage has room
//	Downloading     parallel, resumable, verified GETs into the working folder;
//	                a zip unpacked once the room rule lets it (as Provisioning)
//	Processing      local-id lookup or minting (written to ZooKeeper first),
//	                ERC and Dublin Core files, each name checked against each
//	                storage target's limits, the storage manifest
//	Storing         a new version in the primary storage and each replica
//	                (none where nothing changed)
//	Recording       the stored version, its copies and PREMIS events, in the
//	                inventory database
//	Notify          the profile's callback; the working folder goes
//	Reporting       the batch report, e-mailed to the profile's addresses and
//	                posted to its report_callback
//
// Every step can run again on the same job after a crash, on this daemon or
// another: each one resumes from what the last run left (a verified file, a
// minted identifier, a stored version) instead of redoing it.
//
// Each byte is hashed once on its way in, while it is written: a download
// computes the manifest's digest and SHA-256 in one pass, an extraction and
// the system files hash what they write, and the digest record in the
// working folder carries the SHA-256 to Processing (the storage manifest),
// Storing and Recording. Storing takes each file into a local primary storage
// root on the same file system by a hard link, not a copy. See digests.go.
//
// What a job hands to the next consumer (the store and inventory manifest
// URLs) is served by Handoff at the daemon's advertised URL, so that a
// program on another host can work Storing or Recording; each URL carries
// the key of the job's hand-off, and is served only with it.
//
// Errors a retry cannot fix (a digest mismatch, a hostile file name, an
// identifier mismatch, a refusing storage) are reactor.Fatal: the job fails
// at once, with the cause in its message. Everything else is retried.
package handlers
