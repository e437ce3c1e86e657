package access_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A folder that holds other files beside the packages (the data folder
// given as --access-dir) keeps them: the daemon's server gives out none of
// them, and the sweep removes only what is shaped as a package that no
// request names. Before, the server gave anyone the folder's inventory.db,
// and the first sweep deleted it, with serve.lock and the rest.
func TestAFolderSharedWithOtherFilesKeepsThem(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{sweep: 20 * time.Millisecond})
	dir := r.as.Dir()
	others := []string{"inventory.db", "serve.lock", "notes.txt"}
	orphan := "ark_99999_fk4gone-" + uuid.NewString() + ".zip" // its request was deleted
	for _, name := range append(others, orphan) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("kept by someone\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range others {
		if code := get(t, r.web.URL+access.Prefix+name); code != http.StatusNotFound {
			t.Errorf("GET %s%s: %d, want 404", access.Prefix, name, code)
		}
	}
	waitGone(t, filepath.Join(dir, orphan)) // a sweep ran with every file there
	for _, name := range others {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the sweep removed a file that is no package: %v", err)
		}
	}
}

// The same with a bucket: packages sent to the prefix of the OCFL storage
// root (--access-to naming the storage's place) leave the root's own
// objects, its declaration and its layout. Before, the first sweep after a
// deposit deleted them, and the storage root was gone.
func TestAPrefixSharedWithStorageKeepsItsObjects(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	root := srv.URL(srv.Addr, "ocfl")
	r := newRig(t, rigConfig{storage: []string{root}, to: root, sweep: 20 * time.Millisecond})
	r.deposit("obj-1", v1Files)
	top := func() []string {
		return slices.DeleteFunc(keysAt(t, root), func(k string) bool { return strings.Contains(k, "/") })
	}
	before := top()
	if !slices.Contains(before, "0=ocfl_1.1") {
		t.Fatalf("the storage root's own objects: %q, want its declaration 0=ocfl_1.1", before)
	}
	orphan := "ark_99999_fk4gone-" + uuid.NewString() + ".zip" // its request was deleted
	pl, err := place.OpenExisting(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("an orphan package\n")
	if err := pl.Put(t.Context(), orphan, strings.NewReader(string(body)), int64(len(body)), sum(body)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for slices.Contains(top(), orphan) { // a sweep ran with the root's objects there
		if time.Now().After(deadline) {
			t.Fatalf("the orphan package %s is still there", orphan)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after := top(); !slices.Equal(after, before) {
		t.Errorf("the sweep changed the storage root's own objects: %q, then %q", before, after)
	}
}

// A request another tool or a person wrote, whose token is not a uuid as
// ingestq makes them, fails at once naming the token: its package would be
// named so that the daemon neither serves it nor sweeps it. Before, such a
// request ended Completed with a URL that answered 404.
func TestATokenThatIsNoUUIDFails(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{})
	ark := r.deposit("obj-1", v1Files)
	for _, token := range []string{"0123456789abcdef", strings.ToUpper(uuid.NewString())} {
		tok := queue.AccessToken{Token: token, ARK: ark, Format: queue.FormatZip, TokenStatus: queue.TokenNotReady}
		a, err := r.q.CreateAccess(t.Context(), queue.AccessSmall, tok.Map(nil))
		if err != nil {
			t.Fatal(err)
		}
		r.waitFor(a.Ref(), queue.Completed, queue.Failed)
		v, err := r.ops.ShowAccess(t.Context(), a.Ref())
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("token %q: want a uuid in lower case", token)
		if v.State != queue.Failed || !strings.Contains(v.Message, want) || v.Token.Package != nil {
			t.Errorf("token %q: %s %q, url %q; want Failed saying %q, no package", token, v.State, v.Message, v.Token.URL, want)
		}
	}
}
