package natstest

import "strings"

// A nuid (github.com/nats-io/nuid) is 12 characters of its generator's
// prefix, then a sequence of 10 base-62 digits that steps by the
// generator's increment: whoever reads a few nuids of one generator can
// enumerate those it made before and after. Tests use these to show that
// nothing secret or foreseeable is one.

const nuidDigits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

const nuidPrefixLen, nuidLen = 12, 22

// NuidStep is the increment of the generator that made ids, as their reader
// infers it: the greatest common divisor of their steps; 0 when they are no
// nuids of one generator.
func NuidStep(ids []string) int64 {
	var step int64
	for i := 1; i < len(ids); i++ {
		if len(ids[i]) != nuidLen || len(ids[i-1]) != nuidLen || ids[i][:nuidPrefixLen] != ids[0][:nuidPrefixLen] {
			return 0
		}
		a, b := NuidSeq(ids[i-1]), NuidSeq(ids[i])
		step = gcd(step, max(a, b)-min(a, b))
	}
	return step
}

// NuidSeq is the sequence of the nuid id.
func NuidSeq(id string) int64 {
	var n int64
	for _, c := range id[nuidPrefixLen:] {
		n = n*62 + int64(strings.IndexRune(nuidDigits, c))
	}
	return n
}

// NuidAt is the nuid of the prefix of like and sequence seq.
func NuidAt(like string, seq int64) string {
	b := []byte(like[:nuidPrefixLen] + "0000000000")
	for i := len(b) - 1; i >= nuidPrefixLen; i, seq = i-1, seq/62 {
		b[i] = nuidDigits[seq%62]
	}
	return string(b)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
