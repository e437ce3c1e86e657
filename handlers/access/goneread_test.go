package access_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A restarted server (no sweep yet) that looks a package's name up in the
// queues serves it when its request was read, though another request of
// the queues cannot be read: only a name no readable request names is in
// doubt. Before, the first download of each name got 503.
func TestAPackageIsServedThoughAnotherRequestIsUnreadable(t *testing.T) {
	t.Parallel()
	v, srv, _ := restartedBesideAnUnreadableRequest(t)
	if code, body := getText(t, srv+access.Prefix+v.Token.Package.Name); code != http.StatusOK {
		t.Errorf("GET of a Completed request's package, another request unreadable: %d %.120q; want 200", code, body)
	}
}

// A package no readable request names, while another request cannot be
// read, is in doubt: 503, and its next downloads until the Retry-After
// are refused without a read of every request. Before, each of them read
// both queues whole (4 reads a request).
func TestADoubtedPackageIsNotAReadOfEveryRequestEachDownload(t *testing.T) {
	t.Parallel()
	v, srv, q := restartedBesideAnUnreadableRequest(t)
	orphan := strings.Replace(v.Token.Package.Name, v.Token.Token, "00000000-0000-4000-8000-000000000000", 1)
	if err := os.WriteFile(filepath.Join(v.Token.Package.Location, orphan), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before, _ := q.Requests()
		code, body := getText(t, srv+access.Prefix+orphan)
		after, _ := q.Requests()
		if code != http.StatusServiceUnavailable {
			t.Fatalf("GET %d of a package in doubt: %d %.120q; want 503", i, code, body)
		}
		if i > 0 && after != before {
			t.Errorf("GET %d of a package in doubt read ZooKeeper %d times; want none until its Retry-After", i, after-before)
		}
	}
}

// restartedBesideAnUnreadableRequest makes a Completed request's package
// in a rig's folder, and a request no one can read, and serves the folder
// as a restarted daemon does before its first sweep, on a queue of its own
// (its reads counted), its clock stopped. It returns the request, the
// server's URL and its queue.
func restartedBesideAnUnreadableRequest(t *testing.T) (ops.AccessView, string, *queue.Queue) {
	t.Helper()
	r := newRig(t, rigConfig{sweep: time.Hour})
	ark := r.deposit("obj-1", v1Files)
	v, _ := r.request(ops.AccessRequest{ARK: ark})
	if v.State != queue.Completed || v.Token.Package == nil || v.Token.Package.Where != "folder" {
		t.Fatalf("request: %s %q %+v; want Completed in the folder", v.State, v.Message, v.Token.Package)
	}
	s := r.session()
	p, err := s.Conn.Create(r.q.Path("/access/small/qid"), nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn.Create(p+"/status", []byte("not json"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	q := r.queue(s)
	stopped := time.Now()
	restarted, err := access.New(t.Context(), access.Config{Queue: q, Dir: r.as.Dir(), Host: "test", Logger: r.log,
		Now:    func() time.Time { return stopped },
		Source: func(context.Context, string) (storage.Reader, error) { return nil, errors.New("no assembly here") }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(restarted.Handler())
	t.Cleanup(srv.Close)
	return v, srv.URL, q
}

// A daemon whose packages go to S3 alone forgets, at its sweep, the
// packages of the requests no longer in the queue: what it remembers is
// bounded by the queue. Before, nothing pruned it (only a folder's listing
// did), and it grew by every request ever made.
func TestWhatTheServerRemembersIsBoundedByTheQueue(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	r := newRig(t, rigConfig{to: srv.URL(srv.Addr, "packages"), sweep: time.Hour})
	ark := r.deposit("obj-1", v1Files)
	r.ops.RemovePackage = access.RemovePackage
	for range 2 {
		v, _ := r.request(ops.AccessRequest{ARK: ark})
		if _, err := r.ops.DeleteAccess(t.Context(), v.Ref); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.as.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := access.Remembered(r.as); n != 0 {
		t.Errorf("after the sweep, no request left: %d package names remembered; want none", n)
	}
}
