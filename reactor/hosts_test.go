package reactor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A daemon's host node says the jobs its workers hold within a second of a
// change (hostCheck), where it said them only every 15 s: `ingestq hosts`,
// which an operator watches before a restart, is not left behind.
func TestHostNodeSaysJobsInHandSoon(t *testing.T) {
	e := newEnv(t)
	started, proceed := make(chan string, 1), make(chan struct{})
	defer close(proceed)
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Downloading: reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			started <- s.Job.ID
			<-proceed
			return reactor.Result{}, nil
		}),
	})
	e.submit(map[string]any{"payload_url": "passthrough:1"})
	await(t, started, "the step's start")
	// Ten times hostCheck: the node was rewritten only every 15 s before.
	deadline := time.After(10 * time.Second)
	_, _, wait, err := e.q.LiveHost(t.Context(), "host-a")
	if err != nil {
		t.Fatal(err)
	}
	for {
		fired, _, err := e.q.WatchOnce(t.Context(), wait) // set before the read: no change missed
		if err != nil {
			t.Fatal(err)
		}
		h, alive, _, err := e.q.LiveHost(t.Context(), "host-a")
		var info reactor.HostInfo
		if err == nil && alive && json.Unmarshal(h.Data, &info) == nil && info.JobsInHand == 1 {
			return
		}
		select {
		case <-fired:
		case <-deadline:
			t.Fatalf("the host node says %d jobs in hand, want the 1 a worker holds", info.JobsInHand)
		}
	}
}
