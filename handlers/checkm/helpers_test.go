package checkm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusDir holds the shared test manifests (see its README.md).
const corpusDir = "../../testdata/manifests"

// testHost replaces the corpus's placeholder host.
const testHost = "example.org"

// readCorpus reads a corpus file with http://HOST/ made a real host.
func readCorpus(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), "http://HOST/", "http://"+testHost+"/")
}

// parseCorpus parses a corpus file, named by its corpus path in messages.
func parseCorpus(t testing.TB, name string) (*Manifest, error) {
	t.Helper()
	return Parse(strings.NewReader(readCorpus(t, name)), name, Limits{})
}

// mustParse parses text that must be a valid manifest.
func mustParse(t testing.TB, text string) *Manifest {
	t.Helper()
	m, err := Parse(strings.NewReader(text), "test.checkm", Limits{})
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return m
}

// manifest assembles a manifest of the given profile, header lines and
// data lines, ending with #%eof.
func manifest(profile string, lines ...string) string {
	return "#%checkm_0.7\n#%profile | " + profile + "\n" + strings.Join(lines, "\n") + "\n#%eof\n"
}

// corpusFiles lists the files of a corpus folder.
func corpusFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(corpusDir, dir, "*.checkm"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no corpus files in %s: %v", dir, err)
	}
	for i, n := range names {
		names[i] = filepath.ToSlash(filepath.Join(dir, filepath.Base(n)))
	}
	return names
}
