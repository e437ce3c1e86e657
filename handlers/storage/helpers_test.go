package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

const testARK = "ark:/99999/fk4b3c7m0x"

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// workFiles writes contents into a fresh working folder, the way a job's
// download leaves them, and returns them as Files sorted by name.
func workFiles(t *testing.T, contents map[string]string) []File {
	t.Helper()
	dir := t.TempDir()
	var files []File
	for name, content := range contents {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, File{Name: name, Path: p, Size: int64(len(content)), SHA256: digest([]byte(content))})
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files
}

func sampleFiles(t *testing.T) []File {
	return workFiles(t, map[string]string{
		"producer/a.txt":         "hello, archive\n",
		"producer/sub/b.csv":     "x,y\n1,2\n",
		"system/mrt-erc.txt":     "erc:\nwho: Someone\nwhat: Something\n",
		"system/mrt-dc.xml":      "<dc/>",
		"system/mrt-mom.txt":     "moms\n",
		"producer/empty.dat":     "",
		"producer/unicode é.txt": "ünïcödé",
	})
}

// testClient retries quickly and quietly.
func testClient() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = 2
	c.RetryWaitMin = time.Millisecond
	c.RetryWaitMax = 5 * time.Millisecond
	return c
}

// sameFiles reports whether two sorted lists agree on name, size and digest.
func sameFiles(t *testing.T, got, want []File) {
	t.Helper()
	if !sameContent(got, want) {
		t.Fatalf("files differ:\n got %+v\nwant %+v", got, want)
	}
}
