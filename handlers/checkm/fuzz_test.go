package checkm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic, every error
// must be a *LineError, and whatever it accepts must keep its promises.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"good", "bad"} {
		for _, name := range corpusFiles(f, dir) {
			f.Add([]byte(readCorpus(f, name)))
		}
	}
	f.Add([]byte(manifest(IngestManifest, "#%fields | nfo:fileName | nfo:fileUrl", "a | http://x/|||")))
	f.Add([]byte("#%checkm_0.7\n#%profile|\n#%eof"))
	lim := Limits{MaxLineBytes: 1024, MaxEntries: 64, MaxBytes: 64 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(bytes.NewReader(data), "fuzz", lim)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Source != "fuzz" || le.Line < 1 {
				t.Fatalf("error %v (%T) is not a *LineError with a line", err, err)
			}
			return
		}
		if len(m.Entries) == 0 || len(m.Entries) > lim.MaxEntries {
			t.Fatalf("%d entries accepted", len(m.Entries))
		}
		names := map[string]bool{}
		for _, e := range m.Entries {
			if e.URL == "" || e.Size < -1 || e.HashValue != strings.ToLower(e.HashValue) || (e.HashAlg == "") != (e.HashValue == "") {
				t.Fatalf("line %d: entry breaks a promise: %+v", e.Line, e)
			}
			if e.FileName != "" {
				checkCleanName(t, e.FileName, e.FileName)
			}
			if m.Profile == IngestManifest {
				if names[e.FileName] {
					t.Fatalf("line %d: duplicate %q accepted", e.Line, e.FileName)
				}
				names[e.FileName] = true
			}
		}
	})
}

// FuzzCleanName checks that an accepted name is local and already clean.
func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"a", "../a", "a/./b", "/a", "C:a", "a\\b", "a//", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		clean, err := CleanName(name)
		if err != nil {
			if !errors.Is(err, ErrUnsafeName) {
				t.Fatalf("error %v does not wrap ErrUnsafeName", err)
			}
			return
		}
		checkCleanName(t, name, clean)
	})
}
