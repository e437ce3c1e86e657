// Package sha256hex checks the SHA-256 digests that storage, the inventory and
// places pass around: 64 lower-case hex digits, as ingestq writes them.
package sha256hex

// Valid tells whether s is a SHA-256 digest in lower-case hex.
func Valid(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
