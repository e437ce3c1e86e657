package profile

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// ByteSize is a number of bytes. In YAML it is a plain integer (1024) or a
// number with a decimal or binary unit: "10MB", "1.5GiB", "2 GB". Fractions
// of a byte are dropped.
type ByteSize int64

// units maps a lower-cased unit to its multiplier. Both families are
// accepted because operators copy sizes from tools that use either.
var units = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}

var sizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$`)

// ParseByteSize parses "1024", "10MB", "1.5GiB" or "2 GB".
func ParseByteSize(s string) (ByteSize, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size such as 1024, \"10MB\" or \"1.5GiB\"", s)
	}
	mult, ok := units[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("%q has unknown unit %q (use B, kB, MB, GB, TB, PB, KiB, MiB, GiB, TiB or PiB)", s, m[2])
	}
	// big.Rat keeps "1.1GB" exact, where a float64 could be one byte off.
	n, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return 0, fmt.Errorf("%q: bad number %q", s, m[1])
	}
	n.Mul(n, new(big.Rat).SetInt64(mult))
	whole := new(big.Int).Quo(n.Num(), n.Denom())
	if !whole.IsInt64() {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(whole.Int64()), nil
}

// UnmarshalYAML accepts an integer or a string with a unit.
func (b *ByteSize) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a byte size must be a number or a string such as \"10MB\"", node.Line)
	}
	v, err := ParseByteSize(node.Value)
	if err != nil {
		return fmt.Errorf("line %d: byte size %w", node.Line, err)
	}
	*b = v
	return nil
}
