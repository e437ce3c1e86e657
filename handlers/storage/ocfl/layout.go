package ocfl

import (
	"crypto/sha256"
	"encoding/hex"
)

// The storage root's layout: extension 0004-hashed-n-tuple-storage-layout
// with its default parameters. An object's root is three 3-character
// folders taken from the SHA-256 of its id, then the whole digest:
// "ark:/99999/fk4…" → "3c5/a1f/07e/3c5a1f07e…".
const layoutName = "0004-hashed-n-tuple-storage-layout"

// layoutConfig is extensions/<layoutName>/config.json.
type layoutConfig struct {
	ExtensionName   string `json:"extensionName"`
	DigestAlgorithm string `json:"digestAlgorithm"`
	TupleSize       int    `json:"tupleSize"`
	NumberOfTuples  int    `json:"numberOfTuples"`
	ShortObjectRoot bool   `json:"shortObjectRoot"`
}

var ourLayout = layoutConfig{ExtensionName: layoutName, DigestAlgorithm: "sha256", TupleSize: 3, NumberOfTuples: 3}

// layoutDoc is ocfl_layout.json.
type layoutDoc struct {
	Extension   string `json:"extension"`
	Description string `json:"description"`
}

var ourLayoutDoc = layoutDoc{Extension: layoutName,
	Description: "OCFL object identifiers are hashed with SHA-256 and encoded as lower-case hex; " +
		"three 3-character segments of the digest, then the whole digest, make the object root's path."}

// objectRoot is the key of id's object root under the storage root.
func objectRoot(id string) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])
	return h[0:3] + "/" + h[3:6] + "/" + h[6:9] + "/" + h
}
