package container

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// zipEntry describes one entry of a test zip.
type zipEntry struct {
	name  string
	body  string
	mode  fs.FileMode // 0: a regular file (or a folder, by its trailing "/")
	flags uint16
	store bool // store the body uncompressed
}

// writeZip builds a zip of entries in a fresh temporary folder.
func writeZip(t *testing.T, entries ...zipEntry) string {
	t.Helper()
	zipPath := filepath.Join(t.TempDir(), "test.zip")
	if err := os.WriteFile(zipPath, zipBytes(t, entries...), 0o644); err != nil {
		t.Fatal(err)
	}
	return zipPath
}

// zipBytes is a zip of entries, in memory.
func zipBytes(tb testing.TB, entries ...zipEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Flags: e.flags}
		if e.store {
			hdr.Method = zip.Store
		}
		if e.mode != 0 {
			hdr.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// writeZerosZip builds a zip whose one entry is n zero bytes (n a multiple
// of a MiB), its header claiming claim bytes (a liar unless claim == n),
// without compressing them all: the deflate stream is one MiB
// compressed, then the same "one more MiB of zeros" block repeated. A
// 200 MB bomb so costs a few hundred KB and milliseconds, even under -race.
func writeZerosZip(t *testing.T, name string, n, claim int64) string {
	t.Helper()
	const chunk = 1 << 20
	if n < chunk || n%chunk != 0 {
		t.Fatalf("writeZerosZip: %d is not a positive multiple of %d", n, chunk)
	}
	zeros := make([]byte, chunk)
	var out bytes.Buffer
	fw, err := flate.NewWriter(&out, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	// A sync flush ends each block on a byte boundary, so the second block,
	// whose matches reach back only into zeros, can be repeated verbatim.
	fw.Write(zeros)
	fw.Flush()
	first := bytes.Clone(out.Bytes())
	out.Reset()
	fw.Write(zeros)
	fw.Flush()
	steady := bytes.Clone(out.Bytes())
	out.Reset()
	fw.Close()
	final := out.Bytes()

	stream := bytes.NewBuffer(first)
	crc := crc32.Update(0, crc32.IEEETable, zeros)
	for range n/chunk - 1 {
		stream.Write(steady)
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	stream.Write(final)

	zipPath := filepath.Join(t.TempDir(), "bomb.zip")
	f, err := os.Create(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, err := zw.CreateRaw(&zip.FileHeader{
		Name: name, Method: zip.Deflate, CRC32: crc,
		CompressedSize64: uint64(stream.Len()), UncompressedSize64: uint64(claim),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(stream.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return zipPath
}

// missing asserts that nothing exists at p.
func missing(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s exists (or cannot be checked: %v); want nothing there", p, err)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
