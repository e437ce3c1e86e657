package container

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/checkm"
)

// TestRefusedBeforeWriting covers zips that the checks refuse: the error
// names the zip and the entry, and nothing at all is written.
func TestRefusedBeforeWriting(t *testing.T) {
	ok := zipEntry{name: "ok.txt", body: "fine"}
	tests := []struct {
		name    string
		entries []zipEntry
		lim     Limits
		entry   string // the entry the error must name
		want    string
	}{
		{"dot-dot", []zipEntry{ok, {name: "../evil", body: "x"}}, Limits{}, "../evil", `".." element leaves the folder`},
		{"deep dot-dot", []zipEntry{{name: "a/../../../etc/passwd", body: "x"}}, Limits{}, "a/../../../etc/passwd", `".."`},
		{"absolute", []zipEntry{{name: "/etc/passwd", body: "x"}}, Limits{}, "/etc/passwd", "absolute"},
		{"drive letter", []zipEntry{{name: "C:/Windows/evil.dll", body: "x"}}, Limits{}, "C:/Windows/evil.dll", "drive letter"},
		{"backslash", []zipEntry{{name: `..\evil`, body: "x"}}, Limits{}, `..\evil`, "backslash"},
		{"symlink", []zipEntry{ok, {name: "link", body: "/etc/passwd", mode: fs.ModeSymlink | 0o777}}, Limits{}, "link", "symbolic link"},
		{"named pipe", []zipEntry{{name: "fifo", mode: fs.ModeNamedPipe | 0o644}}, Limits{}, "fifo", "not a regular file or folder"},
		{"device", []zipEntry{{name: "sda", mode: fs.ModeDevice | 0o644}}, Limits{}, "sda", "not a regular file or folder"},
		{"encrypted", []zipEntry{{name: "secret.txt", body: "garbage", flags: 0x1}}, Limits{}, "secret.txt", "encrypted"},
		{"duplicate", []zipEntry{ok, {name: "./ok.txt", body: "again"}}, Limits{}, "./ok.txt", `duplicate of entry "ok.txt"`},
		{"duplicate folder", []zipEntry{{name: "d/"}, {name: "d//"}}, Limits{}, "d//", `duplicate of entry "d/"`},
		{"file then folder of it", []zipEntry{{name: "a", body: "x"}, {name: "a/b", body: "y"}}, Limits{}, "a/b", `puts a file inside "a"`},
		{"folder of it then file", []zipEntry{{name: "a/b", body: "y"}, {name: "a", body: "x"}}, Limits{}, "a", `entry "a/b" puts files inside it`},
		{"control character", []zipEntry{{name: "a\x1bb", body: "x"}}, Limits{}, "a\x1bb", "control character"},
		{"folder with data", []zipEntry{ok, {name: "d", body: "hidden", mode: fs.ModeDir | 0o755}}, Limits{}, "d", "is a folder, but its header gives it 6 bytes of data"},
		{"field separator", []zipEntry{{name: "a | b.txt", body: "x"}}, Limits{}, "a | b.txt", "has a |"},
		{"code page name", []zipEntry{ok, {name: "caf\x82.txt", body: "x"}}, Limits{}, "caf\x82.txt", "the zip does not mark its names as UTF-8"},
		{"two of one name", []zipEntry{ok, {name: "ok.txt", body: "again"}}, Limits{}, "ok.txt", "duplicate of an earlier entry of the same name"},
		{"file and folder", []zipEntry{{name: "d/"}, {name: "d", body: "x"}}, Limits{}, "d", `duplicate of entry "d/": one is a file, the other a folder`},
		{"does not fit", []zipEntry{ok}, Limits{Fits: func(n uint64, files int) error { return fmt.Errorf("%d bytes in %d files do not fit", n, files) }}, "", "4 bytes in 1 files do not fit"},
		{"too many entries", []zipEntry{ok, {name: "2"}, {name: "3"}}, Limits{MaxFiles: 2}, "3", "more than the limit of 2 entries"},
		{"too many bytes", []zipEntry{{name: "big", body: strings.Repeat("x", 2000)}}, Limits{MaxBytes: 1000}, "big", "past the limit of 1000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			zipPath := writeZip(t, tt.entries...)
			dest := filepath.Join(t.TempDir(), "dest")
			files, err := Extract(zipPath, dest, tt.lim)
			if err == nil {
				t.Fatalf("extracted %v, want an error", files)
			}
			prefix := fmt.Sprintf("container %s: entry %q: ", zipPath, tt.entry)
			if tt.entry == "" { // the zip as a whole
				prefix = fmt.Sprintf("container %s: ", zipPath)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want it to start with %q and say %q", msg, prefix, tt.want)
			}
			missing(t, dest)
		})
	}
}

func TestUnsafeNamesWrapErrUnsafeName(t *testing.T) {
	_, err := Extract(writeZip(t, zipEntry{name: "../../etc/passwd"}), t.TempDir(), Limits{})
	if !errors.Is(err, checkm.ErrUnsafeName) {
		t.Errorf("error %v does not wrap checkm.ErrUnsafeName", err)
	}
}

func TestTruncatedZip(t *testing.T) {
	zipPath := writeZip(t, zipEntry{name: "a.txt", body: strings.Repeat("abc", 1000)})
	data, err := os.ReadFile(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zipPath, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "dest")
	_, err = Extract(zipPath, dest, Limits{})
	if err == nil || !strings.HasPrefix(err.Error(), "container "+zipPath+": ") || !strings.Contains(err.Error(), ": "+notZip) {
		t.Errorf("error %v, want one naming %s as not a whole zip, in plain words", err, zipPath)
	}
	missing(t, dest)
}

// TestCorruptEntryData flips a byte of a stored entry's data: the checksum
// fails on reading, the error names the entry, and no half file is left.
func TestCorruptEntryData(t *testing.T) {
	body := strings.Repeat("precious data ", 100)
	zipPath := writeZip(t, zipEntry{name: "first.txt", body: "fine"}, zipEntry{name: "corrupt.txt", body: body, store: true})
	data, err := os.ReadFile(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, []byte("precious"))
	if at < 0 {
		t.Fatal("cannot find the entry's data to corrupt")
	}
	data[at] ^= 0xff
	if err := os.WriteFile(zipPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	_, err = Extract(zipPath, dest, Limits{})
	prefix := "container " + zipPath + `: entry "corrupt.txt": data does not match its header: its checksum (CRC-32) differs`
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("error %v, want one starting %q", err, prefix)
	}
	missing(t, filepath.Join(dest, "corrupt.txt"))
}

// ExtractAs names the container as its caller knows it, not by its path.
func TestExtractAsNamesTheContainer(t *testing.T) {
	zipPath := writeZip(t, zipEntry{name: "../evil.txt", body: "x"})
	_, err := ExtractAs(zipPath, "https://example.org/c.zip", t.TempDir(), Limits{})
	if err == nil || !strings.HasPrefix(err.Error(), `container https://example.org/c.zip: entry "../evil.txt": `) ||
		strings.Contains(err.Error(), zipPath) {
		t.Errorf("error %v, want it to name the URL and the entry, not %s", err, zipPath)
	}
}
