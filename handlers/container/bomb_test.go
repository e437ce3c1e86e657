package container

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mib = 1 << 20

// TestZerosZipExtracts checks the bomb builder itself: its zip is valid
// and extracts to the zeros it claims, when the limits allow.
func TestZerosZipExtracts(t *testing.T) {
	zipPath := writeZerosZip(t, "zeros.bin", 3*mib, 3*mib)
	dest := t.TempDir()
	files, err := Extract(zipPath, dest, Limits{MaxRatio: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0] != (File{"zeros.bin", 3 * mib, sha256hex(string(make([]byte, 3*mib)))}) {
		t.Fatalf("files %v, want zeros.bin of %d bytes", files, 3*mib)
	}
	data, err := os.ReadFile(filepath.Join(dest, "zeros.bin"))
	if err != nil || !bytes.Equal(data, make([]byte, 3*mib)) {
		t.Errorf("zeros.bin is not %d zeros (%d bytes read, %v)", 3*mib, len(data), err)
	}
}

func TestZipBomb(t *testing.T) {
	tests := []struct {
		name string
		size int64
		lim  Limits
		want string
	}{
		{"total size", 200 * mib, Limits{MaxBytes: 10 * mib, MaxRatio: 1 << 20}, "total size past the limit of 10485760 bytes"},
		{"ratio", 4 * mib, Limits{MaxRatio: 100}, "more than 100:1"},
		{"default limits", 200 * mib, Limits{}, "more than 1000:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			zipPath := writeZerosZip(t, "zeros.bin", tt.size, tt.size)
			dest := filepath.Join(t.TempDir(), "dest")
			_, err := Extract(zipPath, dest, tt.lim)
			prefix := "container " + zipPath + `: entry "zeros.bin": `
			if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one starting %q and saying %q", err, prefix, tt.want)
			}
			missing(t, dest)
		})
	}
}

// TestLyingHeader: an entry whose header claims 1000 bytes but whose data
// inflates to 4 MiB stops at the claim, and leaves no file behind.
func TestLyingHeader(t *testing.T) {
	zipPath := writeZerosZip(t, "liar.bin", 4*mib, 1000)
	dest := t.TempDir()
	_, err := Extract(zipPath, dest, Limits{})
	prefix := "container " + zipPath + `: entry "liar.bin": `
	if err == nil || !strings.HasPrefix(err.Error(), prefix+"data does not match its header: it holds more than the 1000 bytes the header gives") {
		t.Fatalf("error %v, want one starting %q and saying the data does not match", err, prefix)
	}
	missing(t, filepath.Join(dest, "liar.bin"))
}

// TestCopyCappedCountsWrittenBytes drives the write-side limits directly,
// as a header that lies in a way archive/zip does not catch would.
func TestCopyCappedCountsWrittenBytes(t *testing.T) {
	zeros := func(n int64) io.Reader { return io.LimitReader(zeroReader{}, n) }
	tests := []struct {
		name       string
		src        int64
		budget     int64
		compressed uint64
		ratio      int64
		written    int64
		want       string // "" for success
	}{
		{"fits", 5000, 10_000, 10, 1000, 5000, ""},
		{"exactly the budget", 2 * mib, 2 * mib, 2 * mib, 1, 2 * mib, ""},
		{"budget", 5 * mib, 2 * mib, 5 * mib, 1000, 2 * mib, "passes the container's limit of uncompressed bytes after 2097152 bytes"},
		{"ratio", 5 * mib, 64 * mib, 2048, 1000, 2048 * 1000, "expands past 1000:1 of its 2048 compressed bytes"},
		{"small files escape the ratio", mib, 64 * mib, 1, 1000, mib, ""},
		{"spent budget", 1, 0, 1, 1000, 0, "limit of uncompressed bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst countingWriter
			n, err := copyCapped(&dst, zeros(tt.src), tt.budget, tt.compressed, tt.ratio)
			if n != tt.written || dst.n != tt.written {
				t.Errorf("copied %d, wrote %d; want %d", n, dst.n, tt.written)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n += int64(len(b))
	return len(b), nil
}
