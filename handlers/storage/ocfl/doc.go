// Package ocfl keeps objects as OCFL 1.1 objects (the Oxford Common File
// Layout, https://ocfl.io/1.1/spec/) in a storage root in a [place.Place]:
// a local folder or an S3 bucket. [Store] is a [storage.Store]: the
// daemon's store for every storage target but a storage service.
//
// # The storage root
//
// [New] opens the root, or creates it in an empty place: the declaration
// 0=ocfl_1.1, ocfl_layout.json and the layout's config. The layout is
// extension 0004-hashed-n-tuple-storage-layout (sha256, three tuples of
// three, full object roots): an object's id is its ARK, and its root is
// "abc/def/012/abcdef012…" from the SHA-256 of the ARK. A place holding
// anything else is refused. [Open] opens an existing root the same way and
// writes nothing: a place without one is [ErrNoRoot] (the audit's open).
//
// # Objects and versions
//
// Each object root holds 0=ocfl_object_1.1, inventory.json and its sidecar
// inventory.json.sha256, and version folders v1, v2, … each with its own
// inventory, sidecar and content/. Digests are SHA-256, the digests the
// pipeline computed while downloading: nothing is hashed again except by
// the place, which checks every copy as it writes it. A file the caller
// vouches for (storage.File.Linkable) is not copied at all when the place
// can take it by a hard link ([place.Linker]: a local folder on the same
// file system); the links' folders are synced before the version's
// inventory is written, as copies are. A new version writes
// only content whose digest the object does not hold yet; its state maps
// digests to the object's file names. [Store.Put] is idempotent by content,
// as [storage.Store] requires: files equal to the head version's (names
// and digests) make no version.
//
// # Atomic versions
//
// A Put writes the new content, then vN/inventory.json and its sidecar,
// then the root inventory.json (the commit point), then the root sidecar.
// Until the root inventory names vN, no reader takes vN as the head. A Put
// that dies leaves a version folder the root does not name; the next Put
// of that object completes it when its inventory verifies (all its
// content was written before it) and removes it otherwise. A death between
// the root inventory and its sidecar leaves a stale sidecar: readers accept
// the root inventory when the head version's sidecar names it, and the
// next Put rewrites the root sidecar. Puts of one ARK must not run on two
// hosts at once (the pipeline's storage lock sees to that); within a
// process the Store serialises them itself.
//
// # Sizes
//
// OCFL inventories hold no sizes. [Store.Latest] asks the place for the size
// of each of the head's content files; Put returns the sizes it was given.
//
// # Migration
//
// [Import] copies every version of every object of a [storage.Local]
// folder into a Store, in order, keeping their creation times; run again,
// it skips what is there.
package ocfl
