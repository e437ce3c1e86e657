package ocfltest

import (
	"crypto/sha256"
	"encoding/hex"
)

// ObjectRoot is the key of the object root of id in a storage root of the
// layout the OCFL store declares (0004-hashed-n-tuple: SHA-256, three
// tuples of three), worked out here rather than asked of the store, for
// tests that reach into an object's files.
func ObjectRoot(id string) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])
	return h[0:3] + "/" + h[3:6] + "/" + h[6:9] + "/" + h
}
