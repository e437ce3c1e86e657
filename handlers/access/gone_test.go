package access_test

import (
	"io"
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

// getText fetches url and returns its status and body.
func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

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

// A stored file that reads other bytes than recorded fails its request
// naming the copy read (the OCFL root in a bucket, and the content key),
// and what to do: audit, restore, requeue.
func TestADamagedStoredFileNamesTheCopyRead(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	root := srv.URL(srv.Addr, "ocfl")
	r := newRig(t, rigConfig{storage: []string{root}})
	ark := r.deposit("obj-1", v1Files)
	a := producer(r.stored(ark)[0], "a.txt")
	keys := keysAt(t, root)
	i := slices.IndexFunc(keys, func(k string) bool { return strings.HasSuffix(k, "/v1/content/"+a) })
	if i < 0 {
		t.Fatalf("no content key of %s among %q", a, keys)
	}
	pl, err := place.OpenExisting(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	damaged := []byte("ALPHA\n")
	if err := pl.Put(t.Context(), keys[i], strings.NewReader(string(damaged)), int64(len(damaged)), sum(damaged)); err != nil {
		t.Fatal(err)
	}
	v, _ := r.request(ops.AccessRequest{ARK: ark})
	for _, want := range []string{
		"stored file \"" + a + "\" of " + ark + " version 1 reads as 6 bytes with sha256 " + sum(damaged),
		"(the copy read: s3://",
		"/" + keys[i] + ")",
		"`ingestq audit " + ark + "` checks every stored copy of the object: restore this file from a sound copy, then `ingestq access requeue " + v.Ref + "`",
	} {
		if v.State != queue.Failed || !strings.Contains(v.Message, want) {
			t.Errorf("request: %s %q; want Failed saying %q", v.State, v.Message, want)
		}
	}
}
