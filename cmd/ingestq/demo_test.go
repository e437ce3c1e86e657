package main_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `make demo` is the README's first command: the binary's demo runs on the
// repository's sample content, from start to clean stop.
func TestDemo(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(ingestqBin, "demo", "--content", filepath.Join("..", "..", "testdata", "demo"), "--dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		if known, unknown := races(text); len(known) == 0 || len(unknown) > 0 {
			t.Fatalf("ingestq demo: %v\n%s", err, text)
		}
	}
	for _, want := range []string{
		"4/4 jobs finished (3 completed, 1 failed)",
		"md5 mismatch: want 00000000000000000000000000000000",
		"== Storage: 3 OCFL 1.1 objects in the storage root",
		"== Inventory: 3 objects",
		"demo-poems", "demo-letters", "demo-maps",
		"Done.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "demo-photos") {
		t.Errorf("the object with the wrong digest was stored:\n%s", text)
	}
}
