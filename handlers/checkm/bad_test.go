package checkm

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// wantLineError checks that err is a *LineError for source and line whose
// message says what went wrong.
func wantLineError(t *testing.T, err error, source string, line int, want string) {
	t.Helper()
	var le *LineError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T), want a *LineError", err, err)
	}
	if le.Source != source || le.Line != line {
		t.Errorf("error at %s:%d, want %s:%d (%v)", le.Source, le.Line, source, line, err)
	}
	prefix := fmt.Sprintf("%s:%d: ", source, line)
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, want) {
		t.Errorf("error %q, want it to start with %q and say %q", msg, prefix, want)
	}
}

func TestBadCorpus(t *testing.T) {
	tests := []struct {
		file string
		line int
		want string
	}{
		{"bad/truncated.checkm", 5, "manifest truncated: no #%eof after this line"},
		{"bad/extra-column.checkm", 5, `column 7 ("text/markdown") is beyond the 6 named by #%fields`},
		{"bad/missing-hash-value.checkm", 4, "hash algorithm md5 without a hash value"},
		{"bad/bad-hex.checkm", 4, "is not hexadecimal"},
		{"bad/short-hash.checkm", 4, "has 31 characters, want 32"},
		{"bad/bad-hash-alg.checkm", 4, `unsupported hash algorithm "crc32"`},
		{"bad/negative-size.checkm", 4, `file size "-13" is negative`},
		{"bad/bad-size.checkm", 4, `file size "13kb" is not a whole number`},
		{"bad/no-url.checkm", 4, "no file URL"},
		{"bad/no-url-column.checkm", 3, "no nfo:fileUrl column"},
		{"bad/dotdot-name.checkm", 4, `file name "docs/../../../etc/passwd": unsafe file name: a ".." element leaves the folder`},
		{"bad/absolute-name.checkm", 4, `file name "/etc/passwd": unsafe file name: absolute`},
		{"bad/windows-name.checkm", 4, "has a backslash"},
		{"bad/dotdot-url.checkm", 5, `file name ".." (from the URL): unsafe file name`},
		{"bad/duplicate-name.checkm", 6, `duplicate file name "a.txt" (also on line 4)`},
		{"bad/file-folder-clash.checkm", 5, `puts a file inside "docs", the file on line 4`},
		{"bad/empty.checkm", 1, "empty input"},
		{"bad/no-entries.checkm", 5, "no entries"},
		{"bad/data-after-eof.checkm", 7, "data after #%eof (line 5)"},
		{"bad/fields-after-entry.checkm", 5, "#%fields after the first entry (line 4)"},
		{"bad/unknown-profile.checkm", 2, `unknown profile "http://uc3.cdlib.org/registry/ingest/manifest/mrt-everything-manifest"`},
		{"bad/no-profile.checkm", 2, "entry before any #%profile line"},
		{"bad/not-checkm.checkm", 1, "not a checkm 0.7 manifest"},
		{"bad/not-an-ark.checkm", 5, `primary identifier "hello": not an ARK: want ark:/NAAN/NAME`},
		{"bad/duplicate-object.checkm", 6, `duplicate object: same URL "http://example.org/payload/hello.txt" and local identifier "obj-1" as line 4`},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			m, err := parseCorpus(t, tt.file)
			if err == nil {
				t.Fatalf("parsed %d entries, want an error", len(m.Entries))
			}
			wantLineError(t, err, tt.file, tt.line, tt.want)
		})
	}
	for _, f := range corpusFiles(t, "bad") {
		if !covered[f] {
			t.Errorf("%s has no expectations in TestBadCorpus", f)
		}
	}
}

// TestBadGenerated covers bad input too big, or too odd, to store.
func TestBadGenerated(t *testing.T) {
	entry := "http://example.org/a | | | | | a"
	tests := []struct {
		name string
		text string
		lim  Limits
		line int
		want string
	}{
		{"huge line", manifest(IngestManifest, entry, "http://example.org/"+strings.Repeat("x", 200<<10)),
			Limits{}, 4, "line is longer than 65536 bytes"},
		{"line just over a small limit", manifest(IngestManifest, entry, "http://example.org/bb | | | | | b"),
			Limits{MaxLineBytes: len(entry)}, 4, fmt.Sprintf("line is longer than %d bytes", len(entry))},
		{"too many entries", manifest(IngestManifest, entry, "http://example.org/b | | | | | b", "http://example.org/c | | | | | c"),
			Limits{MaxEntries: 2}, 5, "more than 2 entries"},
		{"too many bytes", manifest(IngestManifest, entry, strings.Repeat("# filler\n", 1000)),
			Limits{MaxBytes: 1000}, 0, "manifest is larger than 1000 bytes"},
		{"relative URL", manifest(IngestManifest, "a.txt | | | | | a.txt"), Limits{}, 3, "is not an absolute URL"},
		{"hash value alone", manifest(IngestManifest, "http://example.org/a | | 0cc175b9c0f1b6a831c399e269772661 | | | a"),
			Limits{}, 3, "without a hash algorithm"},
		{"control character in name", manifest(IngestManifest, "http://example.org/a | | | | | a\x01b"),
			Limits{}, 3, "control character U+0001"},
		{"name folder itself", manifest(IngestManifest, "http://example.org/a | | | | | ./"), Limits{}, 3, "names the folder itself"},
		{"no name in URL", manifest(IngestManifest, "http://example.org/ | | | | |"), Limits{}, 3, "no file name"},
		{"second profile", manifest(IngestManifest, "#%profile | "+BatchManifest, entry), Limits{}, 3, "second #%profile line (the first is line 2)"},
		{"repeated field", manifest(IngestManifest, "#%fields | nfo:fileUrl | nfo:fileName | nfo:filename"),
			Limits{}, 3, "column 3 (nfo:filename) repeats column 2 (nfo:fileName)"},
		{"prefix without URI", manifest(IngestManifest, "#%prefix | x:", entry), Limits{}, 3, "#%prefix needs two values"},
		{"second header", manifest(IngestManifest, "#%checkm_0.7", entry), Limits{}, 3, "second #%checkm_0.7 line"},
		{"blank input", "\n  \n\n", Limits{}, 1, "empty input"},
		{"duplicate container", manifest(ContainerBatch, "http://example.org/c.zip | | | | | | ", "http://example.org/c.zip"),
			Limits{}, 4, "duplicate object"},
		{"duplicate container with a password", manifest(ContainerBatch, "http://u:s3cret@example.org/c.zip | | | | | | ", "http://u:s3cret@example.org/c.zip"),
			Limits{}, 4, `duplicate object: same URL "http://u:xxxxx@example.org/c.zip"`},
		// A line that left out a middle column is read shifted: the error
		// says so, with the columns, beside what the shifted value failed.
		{"name in the hash column", manifest(IngestManifest, "http://example.org/a | a.txt"), Limits{}, 3,
			`line has 2 fields where the 6 columns of checkm's default order (the manifest has no #%fields) are ` +
				`nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName; ` +
				`read as the first 2 of them: unsupported hash algorithm "a.txt"`},
		{"name in the date column", manifest(IngestManifest, "#%fields | nfo:fileUrl | nfo:fileSize | nfo:fileLastModified | nfo:fileName | mrt:mimeType",
			"http://example.org/a | 13 | a.txt"), Limits{}, 4,
			`line has 3 fields where the 5 columns of #%fields on line 3 are nfo:fileUrl | nfo:fileSize | nfo:fileLastModified | nfo:fileName | mrt:mimeType; ` +
				`read as the first 3 of them: nfo:fileLastModified "a.txt" is no date or time`},
		{"size in the hash value column", manifest(IngestManifest, "http://example.org/a | md5 | 13 | | | a"), Limits{}, 3,
			`:3: md5 hash value "13" has 2 characters, want 32`}, // a whole line: the usual message alone
		{"URL that does not parse", manifest(IngestManifest, "http://exa mple.org/a | | | | | a"), Limits{}, 3,
			`file URL "http://exa mple.org/a": invalid character " " in host name`},
		{"bad escape in a URL-only line", manifest(IngestManifest, "http://example.org/%zz"), Limits{}, 3,
			`file URL "http://example.org/%zz": invalid URL escape "%zz"`},
		{"bad escape in a password", manifest(IngestManifest, "http://depositor:s3cret%zz@example.org/a"), Limits{}, 3,
			`file URL "http://depositor:xxxxx@example.org/a": invalid URL escape "%zz"`},
		{"a password and no host", manifest(IngestManifest, "http://depositor:s3cret@"), Limits{}, 3,
			`file URL "http://depositor:xxxxx@" is not an absolute URL`},
		{"empty fields", manifest(IngestManifest, "| | | | | a"), Limits{}, 3, "no file URL"},
		{"size with a sign", manifest(IngestManifest, "http://example.org/a | | | +3 | | a"), Limits{}, 3, `file size "+3" is not a whole number`},
		{"bidi override in a name", manifest(IngestManifest, "http://example.org/a | | | | | report\u202etxt.exe"), Limits{}, 3,
			`file name "report\u202etxt.exe": unsafe file name: has bidirectional control character U+202E`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.text), "gen.checkm", tt.lim)
			if tt.line == 0 { // where a size limit trips depends on read sizes
				var le *LineError
				if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want a *LineError wrapping ErrLimit saying %q", err, tt.want)
				}
				return
			}
			wantLineError(t, err, "gen.checkm", tt.line, tt.want)
		})
	}
}

func TestParseReadsBoundedInput(t *testing.T) {
	// An endless stream of blank lines after #%eof must stop at MaxBytes.
	endless := io.MultiReader(strings.NewReader(manifest(IngestManifest, "http://example.org/a | | | | | a")), endlessNewlines{})
	counted := &countingReader{r: endless}
	_, err := Parse(counted, "endless", Limits{MaxBytes: 1 << 16})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("error %v, want ErrLimit", err)
	}
	if counted.n > 1<<16+1 {
		t.Errorf("read %d bytes, want at most %d", counted.n, 1<<16+1)
	}
}

// A caller that bounds a manifest only by its lines (math.MaxInt64 bytes)
// gets it parsed, not "empty input": the limit's byte more wrapped.
func TestParseTakesTheLargestBound(t *testing.T) {
	text := manifest(IngestManifest, "http://example.org/a | | | | | a")
	m, err := Parse(strings.NewReader(text), "unbounded", Limits{MaxEntries: math.MaxInt, MaxBytes: math.MaxInt64})
	if err != nil {
		t.Fatalf("Parse with MaxBytes math.MaxInt64: %v", err)
	}
	if len(m.Entries) != 1 {
		t.Errorf("%d entries, want 1", len(m.Entries))
	}
}

// So does one that bounds it only by its size (lines of math.MaxInt
// bytes): the room for a line's "\r\n" and the byte more wrapped, and Parse
// panicked making its scanner's buffer.
func TestParseTakesTheLargestLineBound(t *testing.T) {
	text := manifest(IngestManifest, "http://example.org/a | | | | | a")
	m, err := Parse(strings.NewReader(text), "unbounded lines", Limits{MaxLineBytes: math.MaxInt})
	if err != nil {
		t.Fatalf("Parse with MaxLineBytes math.MaxInt: %v", err)
	}
	if len(m.Entries) != 1 {
		t.Errorf("%d entries, want 1", len(m.Entries))
	}
}

type endlessNewlines struct{}

func (endlessNewlines) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = '\n'
	}
	return len(b), nil
}

func TestParseReportsReadErrors(t *testing.T) {
	broken := io.MultiReader(strings.NewReader("#%checkm_0.7\n#%profile | mrt-ingest-manifest\n"), failingReader{})
	_, err := Parse(broken, "net.checkm", Limits{})
	wantLineError(t, err, "net.checkm", 3, "read: connection reset")
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestErrorsTellKinds(t *testing.T) {
	_, err := parseCorpus(t, "bad/truncated.checkm")
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated: %v does not wrap ErrTruncated", err)
	}
	_, err = parseCorpus(t, "bad/no-entries.checkm")
	if !errors.Is(err, ErrNoEntries) {
		t.Errorf("no entries: %v does not wrap ErrNoEntries", err)
	}
	_, err = parseCorpus(t, "bad/dotdot-name.checkm")
	if !errors.Is(err, ErrUnsafeName) {
		t.Errorf("dotdot: %v does not wrap ErrUnsafeName", err)
	}
}
