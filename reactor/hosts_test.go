package reactor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// A daemon's host node says the jobs its workers hold within a second of a
// change (hostCheck), where it said them only every 15 s: `ingestq hosts`,
// which an operator watches before a restart, is not left behind.
func TestHostNodeSaysJobsInHandSoon(t *testing.T) {
	e := newEnv(t)
	stepHeld(t, e, queue.Downloading, "")
	// Ten times hostCheck: the node was rewritten only every 15 s before.
	queuetest.AwaitHostNode(t, e.q, "host-a", 10*time.Second, "1 job in hand", func(h reactor.HostInfo) bool { return h.JobsInHand == 1 })
}

// stepHeld runs daemon host-a, whose step of state holds its job until the
// test ends (saying it waits on doing, unless ""), and returns the job's
// jid once the step runs.
func stepHeld(t *testing.T, e *env, state queue.State, doing string) string {
	started, proceed := make(chan string, 1), make(chan struct{})
	e.run("host-a", map[queue.State]reactor.JobHandler{
		state: reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			if doing != "" {
				s.Doing(doing)
			}
			started <- s.Job.ID
			<-proceed
			return reactor.Result{}, nil
		}),
	})
	t.Cleanup(func() { close(proceed) }) // before the daemon's stop, which waits for the step
	e.submit(map[string]any{"payload_url": "passthrough:1"})
	return await(t, started, "the step's start")
}

// A step that runs long is listed in its host's node with what it waits
// on (Step.Doing), and `ls jobs --stalled` says it of its locked job: a
// back end that hung kept a job locked with nothing but "lock held by".
func TestSlowStepSaysWhatItWaitsOn(t *testing.T) {
	e := newEnv(t)
	jid := stepHeld(t, e, queue.Storing, "storage target s3://b/ocfl")
	queuetest.AwaitHostNode(t, e.q, "host-a", time.Minute, "the step's wait", func(h reactor.HostInfo) bool {
		return h.Waits[jid].What == "storage target s3://b/ocfl"
	})
	j, err := e.q.LoadJob(t.Context(), jid)
	if err != nil {
		t.Fatal(err)
	}
	th, err := stalled.Parse("1s")
	if err != nil {
		t.Fatal(err)
	}
	found, err := stalled.Find(t.Context(), e.q, []*queue.Job{j}, th, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if st := found[jid]; st.Kind != stalled.KindLocked || !strings.Contains(st.Reason, "its step waits on storage target s3://b/ocfl since ") {
		t.Fatalf("the slow step's job is flagged %+v; want locked, saying what its step waits on", st)
	}
}
