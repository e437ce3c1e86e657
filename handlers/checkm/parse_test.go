package checkm

import (
	"reflect"
	"strings"
	"testing"
)

func TestSniff(t *testing.T) {
	tests := []struct {
		head string
		want bool
	}{
		{"#%checkm_0.7\n", true},
		{"#%CHECKM_0.7", true},
		{"\ufeff#%checkm_0.7", true},
		{"\r\n  #%checkm", true},
		{"#%check", false},
		{"", false},
		{"PK\x03\x04", false},
		{"<html>#%checkm", false},
	}
	for _, tt := range tests {
		if got := Sniff([]byte(tt.head)); got != tt.want {
			t.Errorf("Sniff(%q) = %v, want %v", tt.head, got, tt.want)
		}
	}
}

func TestProfileNames(t *testing.T) {
	for _, profile := range []string{IngestManifest, BatchManifest, SingleFileBatch, ContainerBatch} {
		for _, written := range []string{
			profile,
			"http://uc3.cdlib.org/registry/ingest/manifest/" + profile,
			"http://uc3.cdlib.org/registry/ingest/manifest/" + strings.ToUpper(profile) + "/",
		} {
			m := mustParse(t, manifest(written, "http://example.org/a | | | | | a"))
			if m.Profile != profile {
				t.Errorf("#%%profile | %s: got %q, want %q", written, m.Profile, profile)
			}
		}
	}
}

func TestHashNormalisation(t *testing.T) {
	const md5a = "0cc175b9c0f1b6a831c399e269772661"
	sha1a := strings.Repeat("aB", 20)
	sha256a := strings.Repeat("Cd", 32)
	sha512a := strings.Repeat("eF", 64)
	m := mustParse(t, manifest(IngestManifest,
		"http://example.org/1 | MD5 | "+strings.ToUpper(md5a)+" | | | 1",
		"http://example.org/2 | SHA-1 | "+sha1a+" | | | 2",
		"http://example.org/3 | Sha-256 | "+sha256a+" | | | 3",
		"http://example.org/4 | sha512 | "+sha512a+" | | | 4",
		"http://example.org/5 | | | | | 5",
	))
	want := [][2]string{
		{"md5", md5a}, {"sha1", strings.ToLower(sha1a)}, {"sha256", strings.ToLower(sha256a)},
		{"sha512", strings.ToLower(sha512a)}, {"", ""},
	}
	for i, e := range m.Entries {
		if got := [2]string{e.HashAlg, e.HashValue}; got != want[i] {
			t.Errorf("line %d: hash %v, want %v", e.Line, got, want[i])
		}
	}
}

func TestSizes(t *testing.T) {
	m := mustParse(t, manifest(IngestManifest,
		"http://example.org/1 | | | 0 | | 1",
		"http://example.org/2 | | | | | 2",
		"http://example.org/3 | | | 9223372036854775807 | | 3",
	))
	for i, want := range []int64{0, -1, 9223372036854775807} {
		if got := m.Entries[i].Size; got != want {
			t.Errorf("entry %d: size %d, want %d", i, got, want)
		}
	}
	_, err := Parse(strings.NewReader(manifest(IngestManifest, "http://example.org/1 | | | 9223372036854775808 | | 1")), "big", Limits{})
	wantLineError(t, err, "big", 3, "value out of range")
}

func TestLocalIDsSplitAndTrimmed(t *testing.T) {
	m := mustParse(t, manifest(SingleFileBatch,
		"#%fields | nfo:fileUrl | mrt:localIdentifier",
		"http://example.org/a | one ;two;; three ; ",
		"http://example.org/b | ",
	))
	if got, want := m.Entries[0].LocalIDs, []string{"one", "two", "three"}; !reflect.DeepEqual(got, want) {
		t.Errorf("local ids %q, want %q", got, want)
	}
	if got := m.Entries[1].LocalIDs; got != nil {
		t.Errorf("empty local id field gave %q, want none", got)
	}
}

func TestFieldsResolveThroughPrefixes(t *testing.T) {
	m := mustParse(t, manifest(IngestManifest,
		"#%prefix | m: | http://merritt.cdlib.org/terms#",
		"#%prefix | files | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#",
		"#%fields | m:mimeType | x:ignored | files:FILENAME | fileUrl | http://merritt.cdlib.org/terms#title",
		"text/plain | whatever | doc.txt | http://example.org/d | A title",
	))
	e := m.Entries[0]
	if e.MimeType != "text/plain" || e.FileName != "doc.txt" || e.URL != "http://example.org/d" || e.What != "A title" {
		t.Errorf("entry %+v: columns resolved wrongly", e)
	}
	if want := []string{"m:mimeType", "x:ignored", "files:FILENAME", "fileUrl", "http://merritt.cdlib.org/terms#title"}; !reflect.DeepEqual(m.Fields, want) {
		t.Errorf("fields %q, want %q", m.Fields, want)
	}
}

func TestLenientLayout(t *testing.T) {
	text := "\ufeff\r\n#%checkm_0.7\r\n# a comment\r\n#%profile | " + IngestManifest + "\r\n" +
		"#%unknown-directive | kept quiet\r\n\r\n" +
		"  http://example.org/a.txt | md5 | 0cc175b9c0f1b6a831c399e269772661 | 1 | | a.txt | |  \r\n" +
		"#%eof\r\n\r\n   \n"
	m := mustParse(t, text)
	if len(m.Entries) != 1 || m.Entries[0].Line != 7 || m.Entries[0].FileName != "a.txt" || m.Entries[0].Size != 1 {
		t.Errorf("entries %+v, want a.txt of 1 byte on line 7", m.Entries)
	}
	if !reflect.DeepEqual(m.Fields, defaultFieldNames) {
		t.Errorf("fields %q, want the checkm default", m.Fields)
	}
}

func TestMissingTrailingColumnsAreEmpty(t *testing.T) {
	m := mustParse(t, manifest(IngestManifest, "http://example.org/dir/b%C3%A9b%C3%A9.txt"))
	e := m.Entries[0]
	if e.FileName != "bébé.txt" || e.Size != -1 || e.HashAlg != "" {
		t.Errorf("entry %+v: want name from the URL, size unknown, no hash", e)
	}
}

func TestBatchNamesAreOptional(t *testing.T) {
	m := mustParse(t, manifest(BatchManifest, "http://example.org/manifests/?id=7"))
	if got := m.Entries[0].FileName; got != "" {
		t.Errorf("file name %q, want none", got)
	}
}

func TestSameFileInTwoFolders(t *testing.T) {
	m := mustParse(t, manifest(IngestManifest,
		"http://example.org/a | | | | | x/a.txt",
		"http://example.org/a | | | | | y/a.txt",
		"http://example.org/a | | | | | x/z/a.txt",
	))
	if len(m.Entries) != 3 {
		t.Errorf("%d entries, want 3", len(m.Entries))
	}
}

func TestFolderThenClashingFile(t *testing.T) {
	_, err := Parse(strings.NewReader(manifest(IngestManifest,
		"http://example.org/a | | | | | x/y/a.txt",
		"http://example.org/a | | | | | x",
	)), "clash", Limits{})
	wantLineError(t, err, "clash", 4, `file name "x" is also a folder of the file on line 3`)
}

// Checkm names files relative to the manifest: a relative file URL is
// resolved against the manifest's URL, and an absolute one is kept as written.
func TestRelativeURLsResolveAgainstTheManifest(t *testing.T) {
	text := manifest(IngestManifest,
		"files/a.txt | | | | | a.txt",
		"../shared/b%20c.txt | | | | | b.txt",
		"/top/c.txt | | | | | c.txt",
		"//mirror.example.org/d.txt | | | | | d.txt",
		"HTTP://Example.org/E.txt | | | | | e.txt")
	for _, tt := range []struct {
		source string
		want   []string
	}{
		{"http://example.org/deposits/obj/manifest.checkm", []string{
			"http://example.org/deposits/obj/files/a.txt",
			"http://example.org/deposits/shared/b%20c.txt",
			"http://example.org/top/c.txt",
			"http://mirror.example.org/d.txt",
			"HTTP://Example.org/E.txt",
		}},
		{"file:///srv/deposits/obj/manifest.checkm", []string{
			"file:///srv/deposits/obj/files/a.txt",
			"file:///srv/deposits/shared/b%20c.txt",
			"file:///top/c.txt",
			"file://mirror.example.org/d.txt",
			"HTTP://Example.org/E.txt",
		}},
	} {
		m, err := Parse(strings.NewReader(text), tt.source, Limits{})
		if err != nil {
			t.Fatalf("source %s: %v", tt.source, err)
		}
		var got []string
		for _, e := range m.Entries {
			got = append(got, e.URL)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("source %s: URLs\n%q\nwant\n%q", tt.source, got, tt.want)
		}
	}
}
