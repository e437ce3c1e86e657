package handlers

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A working folder's hand-off key: made once, before its first storage
// manifest, private to the daemon's user, and the same for every step run
// again in that folder (a retry, a requeue), so that the URLs in the job's
// nodes stay the ones served. A folder whose storage manifest a release
// before keys wrote gets none, ever: its URLs, in the job's nodes already,
// stay served. A key file that holds no key is an error naming it.
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
	if key, err := makeHandoffKey(work); key != "" || err == nil || !strings.Contains(err.Error(), spoilt) {
		t.Errorf("an empty key file: %q %v, want an error naming %s", key, err, spoilt)
	}
}
