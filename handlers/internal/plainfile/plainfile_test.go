package plainfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Only a plain file is opened: a pipe is refused at once (no writer is
// waited for), a socket too, a symbolic link at the path's end is not
// followed by Open, by OpenIn only while it stays inside the folder, and
// by OpenFollowing wherever it goes; Read takes no more than its bound.
func TestOnlyAPlainFileIsOpened(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	put := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	put(os.WriteFile(filepath.Join(dir, "plain"), []byte("1234"), 0o600))
	put(os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	put(syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600))
	put(os.Mkdir(filepath.Join(dir, "folder"), 0o700))
	// A socket opens with ENXIO, not refused as no plain file: a hand-off
	// key file swapped for one lost the key's refusal and its advice.
	sock, err := net.Listen("unix", filepath.Join(dir, "socket"))
	put(err)
	defer sock.Close()
	put(os.Symlink("plain", filepath.Join(dir, "inside")))
	put(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "outside")))

	type opened struct {
		f   *os.File
		err error
	}
	open := func(how string, name string) error {
		t.Helper()
		done := make(chan opened, 1)
		go func() {
			var f *os.File
			var err error
			switch how {
			case "Open":
				f, _, err = Open(filepath.Join(dir, name))
			case "OpenFollowing":
				f, _, err = OpenFollowing(filepath.Join(dir, name))
			default:
				f, _, err = OpenIn(dir, name)
			}
			done <- opened{f, err}
		}()
		select {
		case o := <-done:
			if o.f != nil {
				o.f.Close()
			}
			return o.err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s(%s) still opening after 10 s", how, name)
			return nil
		}
	}
	for _, c := range []struct {
		how, name string
		plain     bool
	}{
		{"Open", "plain", true}, {"Open", "pipe", false}, {"Open", "folder", false}, {"Open", "inside", false}, {"Open", "outside", false}, {"Open", "socket", false},
		{"OpenIn", "plain", true}, {"OpenIn", "pipe", false}, {"OpenIn", "folder", false}, {"OpenIn", "inside", true}, {"OpenIn", "socket", false},
		{"OpenFollowing", "plain", true}, {"OpenFollowing", "pipe", false}, {"OpenFollowing", "folder", false},
		{"OpenFollowing", "inside", true}, {"OpenFollowing", "outside", true}, {"OpenFollowing", "socket", false},
	} {
		err := open(c.how, c.name)
		if c.plain != (err == nil) || !c.plain && !errors.Is(err, ErrNotPlain) {
			t.Errorf("%s(%s): %v, want plain %v (else ErrNotPlain)", c.how, c.name, err, c.plain)
		}
	}
	if err := open("OpenIn", "outside"); err == nil {
		t.Error("OpenIn followed a symbolic link out of its folder")
	}

	path := filepath.Join(dir, "plain")
	if data, err := Read(path, 4); string(data) != "1234" || err != nil {
		t.Errorf("Read of 4 bytes, bound 4: %q %v", data, err)
	}
	if _, err := Read(path, 3); !errors.As(err, new(*TooLongError)) || !strings.Contains(err.Error(), "4 bytes, more than 3") {
		t.Errorf("Read of 4 bytes, bound 3: %v, want a TooLongError", err)
	}
	if data, err := Read(path, -1); string(data) != "1234" || err != nil {
		t.Errorf("Read unbounded: %q %v", data, err)
	}
}
