package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// `ingestq demo --keep` ends saying where it kept what it made, and how to
// look at it; each place it names is there.
func TestDemoKeepSaysWhere(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "kept")
	text := runDemo(t, dir, "--keep")
	_, kept, ok := strings.Cut(text, "== Kept (--keep): what the demo made is in "+dir+"\n")
	if !ok {
		t.Fatalf("the demo's output does not say where it kept its files:\n%s", text)
	}
	for _, want := range []string{"logs: daemon.log", "ingestq object --inventory ", "rm -r " + dir} {
		if !strings.Contains(kept, want) {
			t.Errorf("what the demo kept lacks %q:\n%s", want, kept)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^  (?:storage|inventory|ZooKeeper's data): (\S+?),? `).FindAllStringSubmatch(kept, -1) {
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("the kept %s: %v", m[1], err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "daemon.log")); err != nil {
		t.Errorf("the kept log: %v", err)
	}
}
