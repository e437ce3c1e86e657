package ocfl

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// gatedPlace holds its first content Put until released, as a writer
// paused mid-Put; then that Put fails when failHeld is set (the store's
// write errors out after the pause) or goes on.
type gatedPlace struct {
	place.Place
	held, release chan struct{}
	once          atomic.Bool
	failHeld      bool
}

var errAfterPause = errors.New("write failed after the pause")

func (g *gatedPlace) Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error {
	if strings.Contains(key, "/content/") && g.once.CompareAndSwap(false, true) {
		close(g.held)
		<-g.release
		if g.failHeld {
			return errAfterPause
		}
	}
	return g.Place.Put(ctx, key, r, size, sum)
}

var errLockLost = errors.New("the storage lock is another's now")

// A writer paused mid-Put whose lock went meanwhile (its fence fails once
// it wakes) while another writer stored the same object: whether its own
// writes go on or fail, it neither writes the version's inventory, nor
// commits, nor removes the version the other made. The object stays the
// other writer's version 1, valid.
func TestPausedWriterFenced(t *testing.T) {
	for _, failHeld := range []bool{false, true} {
		name := "its writes go on"
		if failHeld {
			name = "its write fails"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			gate := &gatedPlace{Place: openStore(t, dir).p, held: make(chan struct{}), release: make(chan struct{}), failHeld: failHeld}
			paused := &Store{p: gate}
			var lost atomic.Bool
			fence := func(context.Context) error {
				if lost.Load() {
					return errLockLost
				}
				return nil
			}
			files := workFiles(t, sample)
			done := make(chan error, 1)
			go func() {
				_, err := paused.Put(ctx, storage.Object{ARK: testARK, Files: files, Fence: fence})
				done <- err
			}()
			<-gate.held

			other := openStore(t, dir)
			v, err := other.Put(ctx, storage.Object{ARK: testARK, Files: workFiles(t, sample)})
			if err != nil || v.Number != 1 {
				t.Fatalf("the other writer's Put: version %d, %v", v.Number, err)
			}
			root := filepath.Join(dir, objectRoot(testARK))
			before := readAll(t, root)
			lost.Store(true)
			close(gate.release)

			err = <-done
			if !errors.Is(err, errLockLost) {
				t.Fatalf("the paused writer's Put: %v, want its fence's error", err)
			}
			// The other writer's recovery swept the paused writer's temporary
			// files (decision 238): its first write to fail may be one of
			// those, not the held one.
			if failHeld && !errors.Is(err, errAfterPause) && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the paused writer's Put: %v, want its write's error too", err)
			}
			after := readAll(t, root)
			for _, name := range []string{"inventory.json", "inventory.json.sha512", "v1/inventory.json", "v1/inventory.json.sha512"} {
				if after[name] != before[name] {
					t.Errorf("%s changed after the paused writer woke", name)
				}
			}
			for name := range before {
				if _, ok := after[name]; !ok {
					t.Errorf("%s of the other writer's version was removed", name)
				}
			}
			got, err := openStore(t, dir).Latest(ctx, testARK)
			if err != nil || got.Number != 1 {
				t.Fatalf("latest: version %d, %v", got.Number, err)
			}
			sameFiles(t, got.Files, files)
			ocfltest.Validate(t, dir)
		})
	}
}

// readAll reads every file under dir, by slash path relative to it.
func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
