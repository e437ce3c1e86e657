package checkm

import (
	"fmt"
	"strings"
	"testing"
)

// bigManifest builds an object manifest of n files in 100 folders.
func bigManifest(n int) string {
	var b strings.Builder
	b.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-ingest-manifest\n")
	b.WriteString("#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName | mrt:mimeType\n")
	for i := range n {
		fmt.Fprintf(&b, "http://example.org/files/%d.dat | sha256 | %064x | %d | | folder-%02d/file-%05d.dat | application/octet-stream\n",
			i, i, i, i%100, i)
	}
	b.WriteString("#%eof\n")
	return b.String()
}

func TestTenThousandFiles(t *testing.T) {
	const n = 10_000
	m := mustParse(t, bigManifest(n))
	if len(m.Entries) != n {
		t.Fatalf("%d entries, want %d", len(m.Entries), n)
	}
	last := m.Entries[n-1]
	if last.Line != n+3 || last.FileName != "folder-99/file-09999.dat" || last.Size != n-1 || last.HashValue != fmt.Sprintf("%064x", n-1) {
		t.Errorf("last entry %+v", last)
	}
}

func BenchmarkParseTenThousandFiles(b *testing.B) {
	text := bigManifest(10_000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Parse(strings.NewReader(text), "bench", Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
