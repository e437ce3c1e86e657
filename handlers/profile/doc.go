// Package profile reads ingest profiles (one per collection) from a
// directory of YAML files, validates them, and publishes them to ZooKeeper
// so that `ingestq submit` on any host can refuse a job for an unknown
// profile without reading the daemon's configuration directory.
//
// A profile file is strict: an unknown key is an error naming the file and
// line, because a misspelt key (say "priorty") would otherwise be silently
// ignored and the operator would never learn why the setting had no effect.
// The file name's stem must equal the profile's name, so that the file an
// operator edits is always the one that is loaded for that name.
//
// testdata/profiles/demo.yml is a commented example of every field.
package profile
