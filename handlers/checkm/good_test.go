package checkm

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestGoodCorpus(t *testing.T) {
	const (
		helloMD5     = "22c3683b094136c3398391ae71b20f04"
		readmeSHA256 = "6fda1abf6acb4ed663f123f0f130be603504f0178db8baeca0066d4fe9d9c648"
	)
	url := func(p string) string { return "http://" + testHost + "/" + p }
	tests := []struct {
		file    string
		profile string
		entries []Entry
	}{
		{"good/ingest.checkm", IngestManifest, []Entry{
			{Line: 7, URL: url("payload/hello.txt"), HashAlg: "md5", HashValue: helloMD5, Size: 13,
				Modified: "2024-01-15T10:00:00Z", FileName: "hello.txt", MimeType: "text/plain"},
			{Line: 8, URL: url("payload/docs/readme.md"), HashAlg: "sha256", HashValue: readmeSHA256, Size: 36,
				FileName: "docs/readme.md", MimeType: "text/markdown"},
			{Line: 9, URL: url("payload/data%20table.csv"), HashAlg: "sha1",
				HashValue: "925589abb227b866f4dff58a7353ad894efcfa61", Size: 23, FileName: "data table.csv", MimeType: "text/csv"},
		}},
		{"good/no-fields.checkm", IngestManifest, []Entry{
			{Line: 4, URL: url("payload/hello.txt"), HashAlg: "md5", HashValue: helloMD5, Size: 13, FileName: "greeting.txt"},
			{Line: 5, URL: url("payload/docs/readme.md"), HashAlg: "sha256", HashValue: readmeSHA256, Size: 36, FileName: "readme.md"},
		}},
		{"good/batch.checkm", BatchManifest, []Entry{
			{Line: 7, URL: url("good/ingest.checkm"), Size: -1, FileName: "ingest.checkm",
				LocalIDs: []string{"batch-obj-1", "batch-obj-1b"}, Who: "Doe, Jane", What: "Three files", When: "2024-01-15"},
			{Line: 8, URL: url("good/no-fields.checkm"), Size: -1, FileName: "no-fields.checkm", PrimaryID: "ark:/99999/fk4batch2",
				LocalIDs: []string{"batch-obj-2"}, Who: "Roe, Richard", What: "Two files", When: "2024"},
		}},
		{"good/single-file-batch.checkm", SingleFileBatch, []Entry{
			{Line: 7, URL: url("payload/hello.txt"), HashAlg: "md5", HashValue: helloMD5, Size: 13, FileName: "hello.txt",
				LocalIDs: []string{"single-1"}, Who: "Doe, Jane", What: "Hello", When: "2024-01-15"},
			{Line: 8, URL: url("payload/docs/readme.md"), HashAlg: "sha256", HashValue: readmeSHA256, Size: 36, FileName: "readme.md",
				LocalIDs: []string{"single-2"}, Who: "Doe, Jane", What: "Readme", When: "2024-01-16"},
			{Line: 9, URL: url("payload/data%20table.csv"), HashAlg: "md5", HashValue: "822cc15c8c63a3c432a2b77e8dcaf782",
				Size: 23, FileName: "data table.csv", LocalIDs: []string{"single-3"}},
		}},
		{"good/container-batch.checkm", ContainerBatch, []Entry{
			{Line: 8, URL: url("containers/object-1.zip"), Size: -1, FileName: "object-1.zip",
				LocalIDs: []string{"container-1"}, Who: "Doe, Jane", What: "First container", When: "2024-01-15"},
			{Line: 9, URL: url("containers/object-2.zip"), Size: -1, FileName: "object-2.zip", PrimaryID: "ark:/99999/fk4cont2",
				LocalIDs: []string{"container-2", "container-2b"}, Where: "http://example.org/where/2"},
		}},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			m, err := parseCorpus(t, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if m.Source != tt.file || m.Profile != tt.profile {
				t.Errorf("source %q profile %q, want %q %q", m.Source, m.Profile, tt.file, tt.profile)
			}
			if !reflect.DeepEqual(m.Entries, tt.entries) {
				t.Errorf("entries:\n got %+v\nwant %+v", m.Entries, tt.entries)
			}
		})
	}
	for _, f := range corpusFiles(t, "good") {
		if !covered[f] {
			t.Errorf("%s has no expectations in TestGoodCorpus", f)
		}
	}
}

// TestGoodCorpusMatchesPayload keeps the corpus honest for end-to-end tests:
// every hash and size of a payload file is the file's real one.
func TestGoodCorpusMatchesPayload(t *testing.T) {
	hashers := map[string]func() hash.Hash{"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}
	checked := 0
	for _, file := range corpusFiles(t, "good") {
		m, err := parseCorpus(t, file)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Entries {
			rel, ok := strings.CutPrefix(e.URL, "http://"+testHost+"/payload/")
			if !ok {
				continue
			}
			rel = strings.ReplaceAll(rel, "%20", " ")
			data, err := os.ReadFile(filepath.Join(corpusDir, "payload", rel))
			if err != nil {
				t.Fatalf("%s:%d: %v", file, e.Line, err)
			}
			if e.Size != int64(len(data)) {
				t.Errorf("%s:%d: size %d, file has %d", file, e.Line, e.Size, len(data))
			}
			h := hashers[e.HashAlg]()
			h.Write(data)
			if got := hex.EncodeToString(h.Sum(nil)); got != e.HashValue {
				t.Errorf("%s:%d: %s %s, file has %s", file, e.Line, e.HashAlg, e.HashValue, got)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Errorf("checked %d payload entries, want the corpus to have at least 5", checked)
	}
}

func TestBatchObjectManifestsParse(t *testing.T) {
	m, err := parseCorpus(t, "good/batch.checkm")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Entries {
		rel := strings.TrimPrefix(e.URL, "http://"+testHost+"/")
		obj, err := parseCorpus(t, rel)
		if err != nil {
			t.Fatalf("object manifest of line %d: %v", e.Line, err)
		}
		if obj.Profile != IngestManifest {
			t.Errorf("%s: profile %s, want %s", rel, obj.Profile, IngestManifest)
		}
	}
}
