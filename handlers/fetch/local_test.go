package fetch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func localFile(t *testing.T, data []byte) string {
	path := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFileURLAllowed(t *testing.T) {
	data := payload(150_000, 30)
	src := localFile(t, data)
	c := testClient(Config{AllowFile: true})
	ctx := context.Background()

	path := dest(t)
	var progress counter
	res, err := c.Download(ctx, "file://"+src, path, sha256Want(t, data), progress.add)
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	if res.Digest != digestOf(t, "sha256", data) || progress.n.Load() != int64(len(data)) {
		t.Fatalf("result %+v, progress %d", res, progress.n.Load())
	}

	// A .part left over is resumed here too.
	path = dest(t)
	if err := os.WriteFile(path+".part", data[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Download(ctx, "file://"+src, path, sha256Want(t, data), nil); err != nil || !res.Resumed {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	wantFile(t, path, data)

	if n, err := c.Head(ctx, "file://"+src); err != nil || n != int64(len(data)) {
		t.Fatalf("Head = %d, %v", n, err)
	}
	if b, err := c.Fetch(ctx, "file://"+src, int64(len(data))); err != nil || len(b) != len(data) {
		t.Fatalf("Fetch = %d bytes, %v", len(b), err)
	}
	if _, err := c.Fetch(ctx, "file://"+src, 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Fetch past limit: %v", err)
	}
}

func TestFileURLMismatchAndMissing(t *testing.T) {
	data := payload(10_000, 31)
	src := localFile(t, data)
	c := testClient(Config{AllowFile: true})
	ctx := context.Background()

	path := dest(t)
	_, err := c.Download(ctx, "file://"+src, path, Want{Alg: "md5", Digest: digestOf(t, "md5", payload(10_000, 32)), Size: -1}, nil)
	var m *MismatchError
	if !errors.As(err, &m) || m.What != "md5" || !Permanent(err) {
		t.Fatalf("err = %v, want an md5 mismatch", err)
	}
	wantNoFile(t, path)
	wantNoFile(t, path+".part")

	missing := "file://" + filepath.Join(t.TempDir(), "nothing")
	_, err = c.Download(ctx, missing, dest(t), Want{Size: -1}, nil)
	if !errors.Is(err, fs.ErrNotExist) || !Permanent(err) {
		t.Fatalf("err = %v, want a permanent not-exist", err)
	}
	if n, err := c.Head(ctx, missing); n != -1 || err != nil {
		t.Fatalf("Head of a missing file = %d, %v", n, err)
	}
	if _, err := c.Download(ctx, "file://"+t.TempDir(), dest(t), Want{Size: -1}, nil); !Permanent(err) {
		t.Fatalf("a directory: err = %v, want permanent", err)
	}
	if _, err := c.Download(ctx, "file://elsewhere"+src, dest(t), Want{Size: -1}, nil); !Permanent(err) {
		t.Fatalf("a remote host: err = %v, want permanent", err)
	}
}

func TestFileURLDenied(t *testing.T) {
	src := localFile(t, payload(100, 33))
	c := testClient(Config{})
	ctx := context.Background()
	path := dest(t)
	if _, err := c.Download(ctx, "file://"+src, path, Want{Size: -1}, nil); !errors.Is(err, ErrScheme) || !Permanent(err) {
		t.Fatalf("Download: err = %v, want ErrScheme", err)
	}
	wantNoFile(t, path+".part")
	if _, err := c.Head(ctx, "file://"+src); !errors.Is(err, ErrScheme) {
		t.Fatalf("Head: err = %v, want ErrScheme", err)
	}
	if _, err := c.Fetch(ctx, "file://"+src, 1000); !errors.Is(err, ErrScheme) {
		t.Fatalf("Fetch: err = %v, want ErrScheme", err)
	}
}

// A file: URL that names a pipe, a socket or a device is refused at once,
// permanently, as a folder is: the open of a pipe waited for a writer that
// never came, in a syscall no context ends, and held the job's step (and
// its worker) for good; a device such as /dev/zero was read without end.
func TestFileURLOfNoPlainFile(t *testing.T) {
	t.Parallel()
	pipe := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	c := testClient(Config{AllowFile: true})
	ctx := context.Background()
	for _, src := range []string{pipe, "/dev/zero"} {
		done := make(chan string, 1)
		go func() {
			var why []string
			if _, err := c.Download(ctx, "file://"+src, dest(t), Want{Size: -1}, nil); !Permanent(err) || !strings.Contains(err.Error(), "not a plain file") {
				why = append(why, fmt.Sprintf("Download: %v, want a permanent refusal", err))
			}
			if b, err := c.Fetch(ctx, "file://"+src, 1000); !Permanent(err) {
				why = append(why, fmt.Sprintf("Fetch: %d bytes, %v, want a permanent refusal", len(b), err))
			}
			if n, err := c.Head(ctx, "file://"+src); n != -1 || err != nil {
				why = append(why, fmt.Sprintf("Head: %d, %v, want -1 (none), as of a missing file", n, err))
			}
			done <- strings.Join(why, "; ")
		}()
		select {
		case why := <-done:
			if why != "" {
				t.Errorf("%s: %s", src, why)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still fetching after 10 s", src)
		}
	}
}
