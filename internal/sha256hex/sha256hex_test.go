package sha256hex

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValid(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	for s, want := range map[string]bool{
		good: true, strings.ToUpper(good): false, good[:63]: false, good + "0": false,
		"": false, good[:63] + "g": false,
	} {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}
