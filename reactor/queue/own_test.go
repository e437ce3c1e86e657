package queue_test

import (
	"errors"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A daemon's route is an ephemeral node under its name: another live
// session cannot take the name, the owner may rewrite it, and it goes with
// its session, after which the name is free.
func TestAnnounceRoute(t *testing.T) {
	r := newRun(t)
	connA, qa := r.second()
	_, qb := r.second()
	r.ok(qa.AnnounceRoute(t.Context(), "a", "nats://h1:6222"))
	r.ok(qa.AnnounceRoute(t.Context(), "a", "nats://h1:7222")) // its own: rewritten
	r.ok(qb.AnnounceRoute(t.Context(), "b", "nats://h2:6222"))
	if err := qb.AnnounceRoute(t.Context(), "a", "nats://h2:6222"); !errors.Is(err, queue.ErrRefused) {
		t.Fatalf("b announcing a's name: %v, want ErrRefused", err)
	}
	routes, err := r.q.Routes(t.Context())
	r.ok(err)
	if len(routes) != 2 || routes[0].Name != "a" || string(routes[0].Data) != "nats://h1:7222" || routes[0].Mine ||
		routes[1].Name != "b" || string(routes[1].Data) != "nats://h2:6222" {
		t.Fatalf("Routes = %+v, want a at nats://h1:7222 and b", routes)
	}
	if err := qa.AnnounceRoute(t.Context(), "a/b", "nats://h1:6222"); err == nil {
		t.Fatal("a name with a slash was accepted")
	}

	r.closeAndWait(connA, "/ingestq/routes/a")
	r.ok(qb.AnnounceRoute(t.Context(), "a", "nats://h2:6222"))
	routes, err = qb.Routes(t.Context())
	r.ok(err)
	if len(routes) != 2 || !routes[0].Mine || string(routes[0].Data) != "nats://h2:6222" {
		t.Fatalf("after a's session ended, Routes = %+v, want a taken by b's session", routes)
	}
}
