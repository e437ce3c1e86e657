package mint

import (
	"strings"
	"testing"
)

func TestCheckCharKnownVectors(t *testing.T) {
	// The example of the NOID documentation, "13030/xf93gt2" → "q", by hand:
	// positions 1..13 of 1 3 0 3 0 / x f 9 3 g t 2 have ordinals
	// 1 3 0 3 0 0 27 13 9 3 14 24 2, so the sum is
	// 1 + 6 + 0 + 12 + 0 + 0 + 189 + 104 + 81 + 30 + 154 + 288 + 26 = 891,
	// and 891 mod 29 = 21, the ordinal of "q".
	if got := CheckChar("13030/xf93gt2"); got != 'q' {
		t.Errorf("CheckChar(13030/xf93gt2) = %c, want q", got)
	}
	// The first ARK of a fresh demo counter, "99999/fk4000001":
	// 9×(1+2+3+4+5) + 0 + 13×7 (f) + 17×8 (k) + 4×9 + 1×15 = 413, 413 mod 29 = 7.
	if got := CheckChar("99999/fk4000001"); got != '7' {
		t.Errorf("CheckChar(99999/fk4000001) = %c, want 7", got)
	}
	if got := CheckChar(""); got != '0' {
		t.Errorf("CheckChar(\"\") = %c, want 0", got)
	}
}

func TestEncode(t *testing.T) {
	tests := map[uint64]string{
		0:         "000000",
		1:         "000001",
		10:        "00000b",
		28:        "00000z",
		29:        "000010",
		29*29 - 1: "0000zz",
		594823321: "1000000", // 29^6 needs a seventh character
	}
	for n, want := range tests {
		if got := encode(n); got != want {
			t.Errorf("encode(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestValidCatchesTypos changes every character of real ARKs in every way
// NOID promises to catch and checks that Valid notices.
func TestValidCatchesTypos(t *testing.T) {
	for _, a := range []string{ark("99999", "fk4", 1), ark("13030", "m5", 123456789), ark("12345", "b", 29*29*29)} {
		if !Valid(a) {
			t.Fatalf("Valid(%s) = false", a)
		}
		start := len("ark:/")
		for i := start; i < len(a); i++ {
			if a[i] == '/' {
				continue
			}
			for _, c := range []byte(Alphabet) {
				if c == a[i] {
					continue
				}
				typo := a[:i] + string(c) + a[i+1:]
				if Valid(typo) {
					t.Errorf("Valid(%s) = true: a typo of %s at %d", typo, a, i)
				}
			}
		}
		for i := start; i+1 < len(a); i++ {
			if a[i] == a[i+1] || ordinal(a[i]) == ordinal(a[i+1]) {
				// Same character; or "/" next to "0", both of ordinal 0:
				// NOID's one blind spot (13030/m5 vs 1303/0m5).
				continue
			}
			swapped := a[:i] + string(a[i+1]) + string(a[i]) + a[i+2:]
			if Valid(swapped) {
				t.Errorf("Valid(%s) = true: %s with %d and %d swapped", swapped, a, i, i+1)
			}
		}
	}
}

func TestValidRejectsMalformed(t *testing.T) {
	good := ark("99999", "fk4", 1)
	for _, s := range []string{
		"",
		strings.TrimPrefix(good, "ark:/"),
		strings.Replace(good, "ark:/", "ARK:/", 1),
		"ark:/99999",
		"ark:/99999/",
		"ark://fk40000017",
		"ark:/9a999/fk40000017",
		"ark:/99999/FK40000017",
		"ark:/99999/fk4-000017",
		"ark:/99999/fk4000017", // one counter character short
		good + "/extra",
	} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}

// Number reads back the counter value of every ARK ark mints up to
// minDigits characters, in the order the ARKs sort, and nothing else.
func TestNumberReadsTheCounterBack(t *testing.T) {
	prev := ""
	for _, n := range []uint64{1, 2, 10, 28, 29, 30, 29*29 - 1, 123456789, 594823320} {
		a := ark("99999", "fk4", n)
		if got, ok := Number(a, "99999", "fk4"); !ok || got != n {
			t.Errorf("Number(%s) = %d, %t; want %d", a, got, ok, n)
		}
		if a <= prev {
			t.Errorf("%s sorts before %s, minted earlier", a, prev)
		}
		prev = a
	}
	for _, a := range []string{
		ark("99999", "fk4", 594823321), // a seventh character
		ark("99999", "fk40", 1),        // another shoulder that begins with this one
		ark("12345", "fk4", 1),         // another NAAN
		"ark:/99999/fk40000018",        // a wrong check character
		"ark:/99999/fk4000001",         // too short
		"doi:10.1/fk40000017",
	} {
		if n, ok := Number(a, "99999", "fk4"); ok {
			t.Errorf("Number(%s) = %d, true; want false: not of counter 99999/fk4", a, n)
		}
	}
}
