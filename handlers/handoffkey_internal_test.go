package handlers

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A working folder's hand-off key: made once, before its first storage
// manifest, private to the daemon's user, and the same for every step run
// again in that folder (a retry, a requeue), so that the URLs in the job's
// nodes stay the ones served. A folder whose storage manifest a release
// before keys wrote gets none, ever: its URLs, in the job's nodes already,
// stay served. A key file that holds no key is an error naming it, whose
// advice is the folder's removal.
func TestHandoffKeyIsTheFoldersOwn(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	if _, err := readHandoffKey(work); !errors.Is(err, errNoHandoff) {
		t.Fatalf("a folder with no hand-off: %v, want errNoHandoff", err)
	}
	key, err := makeHandoffKey(work)
	if err != nil || !handoffKeyRE.MatchString(key) {
		t.Fatalf("the key made: %q %v", key, err)
	}
	st, err := os.Stat(filepath.Join(work, handoffKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v, want mode 0600", st, err)
	}
	if err := os.WriteFile(filepath.Join(work, storageManifest), []byte("#%checkm_0.7\n#%eof\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, how := range []func(string) (string, error){makeHandoffKey, readHandoffKey} {
		if again, err := how(work); again != key || err != nil {
			t.Errorf("the key again: %q %v, want %q", again, err, key)
		}
	}
	if other, _ := makeHandoffKey(t.TempDir()); other == key {
		t.Errorf("two folders were given the same key %q", key)
	}

	before := t.TempDir() // a release before keys handed it on
	if err := os.WriteFile(filepath.Join(before, storageManifest), []byte("#%checkm_0.7\n#%eof\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, how := range []func(string) (string, error){makeHandoffKey, readHandoffKey} {
		if key, err := how(before); key != "" || err != nil {
			t.Errorf("a folder handed on without a key: %q %v, want none", key, err)
		}
	}
	if _, err := os.Stat(filepath.Join(before, handoffKeyFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a folder handed on without a key was given one (%v): its URLs would be refused", err)
	}

	spoilt := filepath.Join(work, handoffKeyFile)
	if err := os.WriteFile(spoilt, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its advice is the folder's removal: the key file's alone would leave
	// a manifest without a key, served to anyone.
	if key, err := makeHandoffKey(work); key != "" || err == nil || !strings.Contains(err.Error(), spoilt) ||
		!strings.Contains(err.Error(), "remove the job's working folder "+work+" and requeue") {
		t.Errorf("an empty key file: %q %v, want an error naming %s and the folder's removal", key, err, spoilt)
	}
}

// Two runs of Processing at once in one folder (a session lost mid-step,
// the job taken again while the first run winds down) agree on one key,
// the one the folder keeps: the URL either transition publishes is served.
func TestHandoffKeyIsOneForRunsAtOnce(t *testing.T) {
	t.Parallel()
	const runs, folders = 8, 20
	for range folders {
		work := t.TempDir()
		keys, errs := make([]string, runs), make([]error, runs)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				<-start
				keys[i], errs[i] = makeHandoffKey(work)
			})
		}
		close(start)
		wg.Wait()
		kept, err := readHandoffKey(work)
		if err != nil {
			t.Fatal(err)
		}
		for i := range runs {
			if errs[i] != nil || keys[i] != kept {
				t.Fatalf("run %d of %d at once: key %q (%v); the folder keeps %q: its URL would be refused", i+1, runs, keys[i], errs[i], kept)
			}
		}
		if entries, _ := os.ReadDir(work); len(entries) != 1 {
			t.Fatalf("%d entries in the folder, want the key file alone (no temporary file left)", len(entries))
		}
	}
}

// A key file that is not a plain file (a symlink, a pipe, a folder) or far
// longer than a key is an error naming it, never followed or read whole: a
// symlink could name any file the daemon reads, a pipe would hang every
// request of the job.
func TestHandoffKeyFileIsAPlainFile(t *testing.T) {
	t.Parallel()
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(elsewhere, []byte(rand.Text()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(path string) error{
		"a symlink": func(path string) error { return os.Symlink(elsewhere, path) },
		"a pipe":    func(path string) error { return syscall.Mkfifo(path, 0o600) },
		"a folder":  func(path string) error { return os.Mkdir(path, 0o700) },
		"too long":  func(path string) error { return os.WriteFile(path, []byte(strings.Repeat("A", 1<<20)), 0o600) },
	} {
		work := t.TempDir()
		path := filepath.Join(work, handoffKeyFile)
		if err := plant(path); err != nil {
			t.Fatal(err)
		}
		for what, how := range map[string]func(string) (string, error){"make": makeHandoffKey, "read": readHandoffKey} {
			done := make(chan struct{})
			var key string
			var err error
			go func() {
				defer close(done)
				key, err = how(work)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s the key with %s in its place: still reading after 10 s", what, name)
			}
			if key != "" || err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("%s the key with %s in its place: %.40q %v, want an error naming %s", what, name, key, err, path)
			}
		}
	}
}

// The key file swapped, while requests read it, for a pipe or a symbolic
// link to another key (each put in its place by a rename, as anyone who
// can write the working folder may): every read gives the folder's key or
// an error, none hangs on the pipe, none takes the link's key. A look at
// the path before the open (Lstat) let a read open what was put there in
// between.
func TestHandoffKeyFileSwappedWhileRead(t *testing.T) {
	t.Parallel()
	work, spare := t.TempDir(), t.TempDir()
	path := filepath.Join(work, handoffKeyFile)
	key := rand.Text()
	plain, fifo := filepath.Join(spare, "plain"), filepath.Join(spare, "fifo")
	elsewhere := filepath.Join(spare, "elsewhere")
	for _, err := range []error{os.WriteFile(plain, []byte(key+"\n"), 0o600), syscall.Mkfifo(fifo, 0o600),
		os.WriteFile(elsewhere, []byte(rand.Text()+"\n"), 0o600), os.Link(plain, path)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each swap links the plain file, the pipe (the same inode each time,
	// so that a read hung on it can be let go) or a new symlink under a
	// spare name, then renames it over the key file.
	stop := make(chan struct{})
	swapped := make(chan int)
	go func() {
		n := 0
		defer func() { swapped <- n }()
		for ; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := filepath.Join(spare, "tmp")
			_ = os.Remove(tmp) // a rename of a link over its own inode leaves both
			var err error
			switch n % 3 {
			case 0:
				err = os.Link(plain, tmp)
			case 1:
				err = os.Link(fifo, tmp)
			case 2:
				err = os.Symlink(elsewhere, tmp)
			}
			if err == nil {
				err = os.Rename(tmp, path)
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const readers, took = 4, 2 * time.Second
	type outcome struct {
		key string
		err error
	}
	results := make(chan outcome, 64)
	var wg sync.WaitGroup
	deadline := time.Now().Add(took)
	for range readers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				k, err := readHandoffKey(work)
				results <- outcome{k, err}
			}
		})
	}
	readsDone := make(chan struct{})
	go func() { wg.Wait(); close(readsDone) }()
	var reads, keys int
	wrong := map[string]string{} // the first read of each wrong kind
	hung := false
	watch := time.NewTimer(took + 10*time.Second)
	defer watch.Stop()
collect:
	for {
		select {
		case r := <-results:
			reads++
			switch {
			case r.err == nil && r.key == key:
				keys++
			case r.err == nil:
				wrong["followed"] = cmp.Or(wrong["followed"], fmt.Sprintf("a read took %q, not the folder's key %q: the symbolic link put in its place was followed", r.key, key))
			case !strings.Contains(r.err.Error(), path):
				wrong["unnamed"] = cmp.Or(wrong["unnamed"], fmt.Sprintf("a read's error names no key file: %v", r.err))
			}
		case <-readsDone:
			break collect
		case <-watch.C:
			hung = true
			break collect
		}
	}
	close(stop)
	n := <-swapped
	if hung {
		// Let the reads hung on the pipe go: a writer opens it.
		for range readers {
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
		t.Fatalf("a read of the key file hung on the pipe swapped in after a look at the path (%d reads, %d swaps)", reads, n)
	}
	for _, w := range wrong {
		t.Error(w)
	}
	t.Logf("%d reads (%d gave the key), %d swaps", reads, keys, n)
	if keys == 0 {
		t.Errorf("no read of %d gave the key: the swaps left no plain file to read", reads)
	}
}
