package queuetest

import (
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// TakeAccess takes access request ref on q as a daemon does (the oldest
// unlocked request of its queue, which must be ref) and moves it to
// Processing: q's session then holds it.
func TakeAccess(t testing.TB, q *queue.Queue, ref string) *queue.Access {
	t.Helper()
	name, _, _ := strings.Cut(ref, "/")
	a, _, err := q.AcquireAccessWork(t.Context(), name, nil)
	if err != nil || a == nil || a.Ref() != ref {
		t.Fatalf("acquire %s: %+v %v", ref, a, err)
	}
	if err := q.SetAccessStatus(t.Context(), a, queue.Processing, queue.AccessChange{}); err != nil {
		t.Fatal(err)
	}
	return a
}

// CompleteAccess moves a, taken on q (TakeAccess), to Completed with a
// package x.zip that host wrote to where ("folder" or "s3"), expiring in
// an hour.
func CompleteAccess(t testing.TB, q *queue.Queue, a *queue.Access, where, host string) {
	t.Helper()
	tok, err := a.AccessToken()
	if err != nil {
		t.Fatal(err)
	}
	tok.TokenStatus, tok.URL = queue.TokenReady, "http://"+host+"/access/x.zip"
	tok.Package = &queue.AccessPackage{Name: "x.zip", Where: where, Location: "/data/access", Host: host,
		Expires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	if err := q.SetAccessStatus(t.Context(), a, queue.Completed, queue.AccessChange{Token: tok.Map(a.Token)}); err != nil {
		t.Fatal(err)
	}
}
