package access_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A folder package whose request another session deleted, or whose expiry
// has passed, is 410 Gone at once, saying which and how to ask again, while
// its file is still in the folder (the sweep has not run). Before, both
// answered 200 until the next sweep.
func TestADeletedOrExpiredPackageIsGoneAtOnce(t *testing.T) {
	t.Parallel()
	var ahead atomic.Int64                     // the assembler's clock, ahead of the wall's
	r := newRig(t, rigConfig{sweep: time.Hour, // only the sweep at the start
		now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	ark := r.deposit("obj-1", v1Files)
	other := &ops.Service{Q: r.queue(r.session())} // a CLI's, on another host

	deleted, _ := r.request(ops.AccessRequest{ARK: ark})
	if code, _ := getText(t, deleted.Token.URL); deleted.State != queue.Completed || code != http.StatusOK {
		t.Fatalf("request: %s %q, GET %d; want Completed, 200", deleted.State, deleted.Message, code)
	}
	o, err := other.DeleteAccess(t.Context(), deleted.Ref)
	if err != nil || !strings.Contains(o.Message, "its host test refuses its package from now on") {
		t.Errorf("delete: %+v %v, want it said that the host refuses the package", o, err)
	}
	code, body := getText(t, deleted.Token.URL)
	if want := "access request " + deleted.Ref + " is no longer in the queue (deleted); `ingestq access request " + ark + "` asks again"; code != http.StatusGone || !strings.Contains(body, want) {
		t.Errorf("GET of the deleted request's package: %d %.80q; want 410 saying %q", code, body, want)
	}

	expired, _ := r.request(ops.AccessRequest{ARK: ark})
	ahead.Store(int64(access.DefaultExpiry + time.Hour))
	code, body = getText(t, expired.Token.URL)
	want := "access request " + expired.Ref + " expired at " + queue.NodeText(expired.Token.Package.Expires)
	if code != http.StatusGone || !strings.Contains(body, want) || !strings.Contains(body, "`ingestq access request "+ark+"` asks again") {
		t.Errorf("GET of the expired package: %d %.80q; want 410 saying %q and how to ask again", code, body, want)
	}
	for _, v := range []ops.AccessView{deleted, expired} {
		if _, err := os.Stat(filepath.Join(r.as.Dir(), v.Token.Package.Name)); err != nil {
			t.Errorf("package %s: %v; want it still in the folder (refused before the sweep)", v.Token.Package.Name, err)
		}
	}
}

// Deleting a request whose package is in S3 deletes the package's key at
// once when the door can reach the bucket: its presigned URL answers no
// more. A door that cannot says so, and that the URL works until a sweep.
func TestDeletingAnS3PackagesRequestDeletesItsKey(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	packages := srv.URL(srv.Addr, "packages")
	r := newRig(t, rigConfig{to: packages, sweep: time.Hour})
	ark := r.deposit("obj-1", v1Files)
	r.ops.RemovePackage = access.RemovePackage

	v, _ := r.request(ops.AccessRequest{ARK: ark})
	if code, _ := getText(t, v.Token.URL); v.State != queue.Completed || code != http.StatusOK {
		t.Fatalf("request: %s %q, GET %d; want Completed, 200", v.State, v.Message, code)
	}
	o, err := r.ops.DeleteAccess(t.Context(), v.Ref)
	if want := "(its package " + v.Token.Package.Name + " deleted from " + packages + ")"; err != nil || !strings.Contains(o.Message, want) {
		t.Fatalf("delete: %+v %v; want it to say %q", o, err, want)
	}
	if code, _ := getText(t, v.Token.URL); code == http.StatusOK {
		t.Errorf("GET of the deleted request's presigned URL: %d, want refused", code)
	}
	if keys := keysAt(t, packages); slices.Contains(keys, v.Token.Package.Name) {
		t.Errorf("%s holds %q, want %s gone", packages, keys, v.Token.Package.Name)
	}

	kept, _ := r.request(ops.AccessRequest{ARK: ark})
	noS3 := &ops.Service{Q: r.q}
	o, err = noS3.DeleteAccess(t.Context(), kept.Ref)
	if want := "could not be deleted now: no S3 access here; its URL works until the next sweep"; err != nil || !strings.Contains(o.Message, want) {
		t.Fatalf("delete without S3: %+v %v; want it to say %q", o, err, want)
	}
}

// Deleting a request's package deletes only a package's key: a token that
// names another key (a request written by hand or by another tool) leaves
// it, as the sweep leaves whatever else shares the prefix. Before, any key
// the token named was deleted with the process's credentials.
func TestRemovePackageDeletesOnlyAPackage(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	shared := srv.URL(srv.Addr, "shared")
	pl, err := place.NewS3(t.Context(), shared)
	if err != nil {
		t.Fatal(err)
	}
	kept := []byte("not a package\n")
	if err := pl.Put(t.Context(), "inventory.json", strings.NewReader(string(kept)), int64(len(kept)), sum(kept)); err != nil {
		t.Fatal(err)
	}
	err = access.RemovePackage(t.Context(), &queue.AccessPackage{Name: "inventory.json", Where: "s3", Location: shared})
	if err == nil || !strings.Contains(err.Error(), `"inventory.json" in `+shared+" is not a package's name") {
		t.Errorf("RemovePackage of inventory.json: %v; want refused, naming the key and the place", err)
	}
	if keys := keysAt(t, shared); !slices.Contains(keys, "inventory.json") {
		t.Errorf("%s holds %q after RemovePackage; want inventory.json kept", shared, keys)
	}
}
