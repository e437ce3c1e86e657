package mint

import "strings"

// Alphabet is the NOID "betanumeric" alphabet. Its length, 29, is prime,
// which is what lets the check character detect transpositions.
const Alphabet = "0123456789bcdfghjkmnpqrstvwxz"

// minDigits pads counters so that early ARKs have the same length as later
// ones (29^6 ≈ 595 million before a seventh character appears).
const minDigits = 6

// ordinal is c's index in Alphabet, or 0 for characters outside it (such as
// the "/" between NAAN and shoulder), as NOID defines it.
func ordinal(c byte) int {
	if i := strings.IndexByte(Alphabet, c); i >= 0 {
		return i
	}
	return 0
}

// CheckChar returns the NOID check character of s: the sum over 1-based
// positions i of i × ordinal(s[i]), modulo 29, as a character of Alphabet.
func CheckChar(s string) byte {
	sum := 0
	for i := 0; i < len(s); i++ {
		sum = (sum + (i+1)*ordinal(s[i])) % len(Alphabet)
	}
	return Alphabet[sum]
}

// encode writes n in Alphabet, zero-padded to minDigits.
func encode(n uint64) string {
	var b []byte
	for n > 0 {
		b = append(b, Alphabet[n%uint64(len(Alphabet))])
		n /= uint64(len(Alphabet))
	}
	for len(b) < minDigits {
		b = append(b, Alphabet[0])
	}
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// ark builds the identifier for counter value n.
func ark(naan, shoulder string, n uint64) string {
	base := naan + "/" + shoulder + encode(n)
	return "ark:/" + base + string(CheckChar(base))
}

// Number returns the counter value ark was minted from on the (naan,
// shoulder) counter; ok is false for an ARK of another counter, of another
// form or with a wrong check character, and for a counter past minDigits
// characters: up to there the ARKs of one counter sort bytewise in the
// order they were minted, as the inventory lists them.
func Number(ark, naan, shoulder string) (n uint64, ok bool) {
	digits, found := strings.CutPrefix(ark, "ark:/"+naan+"/"+shoulder)
	if !found || len(digits) != minDigits+1 || !Valid(ark) {
		return 0, false
	}
	for i := 0; i < minDigits; i++ {
		d := strings.IndexByte(Alphabet, digits[i])
		if d < 0 {
			return 0, false
		}
		n = n*uint64(len(Alphabet)) + uint64(d)
	}
	return n, true
}

// Valid reports whether s has the form this package mints,
// "ark:/<digits>/<betanumeric shoulder, counter and check character>",
// and its check character matches.
func Valid(s string) bool {
	rest, ok := strings.CutPrefix(s, "ark:/")
	if !ok {
		return false
	}
	naan, name, ok := strings.Cut(rest, "/")
	if !ok || !isDigits(naan) || !isBetanumeric(name) {
		return false
	}
	// At least a one-character shoulder, minDigits of counter and the check.
	if len(name) < 1+minDigits+1 {
		return false
	}
	return CheckChar(rest[:len(rest)-1]) == rest[len(rest)-1]
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isBetanumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(Alphabet, s[i]) < 0 {
			return false
		}
	}
	return s != ""
}
