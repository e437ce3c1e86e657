package reactor_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A step whose error is longer than a ZooKeeper node holds (300 KB of "<",
// 1.8 MB in the status's JSON) fails its job with the error cut, once:
// before, the move to Failed was refused as too large, the job left in its
// state, taken again and its step run again, without end.
func TestAStepErrorTooLargeForANodeFailsItsJob(t *testing.T) {
	e := newEnv(t)
	failed := e.outside("ingestq.job.failed.*")
	runs := make(chan string, 100)
	e.run("host-a", map[queue.State]reactor.JobHandler{
		queue.Storing: reactor.JobHandlerFunc(func(_ context.Context, s *reactor.Step) (reactor.Result, error) {
			runs <- s.Job.ID
			return reactor.Result{}, reactor.Fatal(errors.New("the store said: " + strings.Repeat("<", 300_000)))
		}),
	})
	b := e.submit(map[string]any{"payload_url": "passthrough:1"})
	jid := await(t, runs, "the step's run")
	select {
	case again := <-runs:
		t.Fatalf("the step of %s ran again: its job was not failed", again)
	case ev := <-failed:
		if ev.JobID != jid || ev.BatchID != b.ID {
			t.Fatalf("failed: job %s of %s, want %s of %s", ev.JobID, ev.BatchID, jid, b.ID)
		}
	}
	j, err := e.q.LoadJob(t.Context(), jid)
	if err != nil {
		t.Fatal(err)
	}
	if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, "Storing: the store said: <<<") || len(j.Status.Message) > 20_000 {
		t.Fatalf("job %s, message of %d bytes %.40q…: want Failed, the step's error cut", j.State(), len(j.Status.Message), j.Status.Message)
	}
}

// tooLongBatch's Objects fails with an error longer than a node holds.
type tooLongBatch struct{ runs chan string }

func (h tooLongBatch) Objects(_ context.Context, b *queue.Batch) ([]reactor.Object, error) {
	h.runs <- b.ID
	return nil, reactor.Fatal(errors.New("the manifest said: " + strings.Repeat("<", 300_000)))
}

// The same for a batch's step: its intake's error, too long for a node,
// fails the batch with the error cut, once.
func TestABatchErrorTooLargeForANodeFailsItsBatch(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	runs := make(chan string, 100)
	e.run("host-a", nil, func(c *reactor.Config) { c.Batches = tooLongBatch{runs} })
	b := e.submit(map[string]any{"payload_url": "passthrough:1"})
	await(t, runs, "the batch step's run")
	for done := false; !done; {
		select {
		case again := <-runs:
			t.Fatalf("the step of %s ran again: its batch was not failed", again)
		case ev := <-batches:
			done = ev.BatchID == b.ID && ev.Kind == events.KindBatch && ev.To == "Failed"
		}
	}
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State() != queue.Failed || !strings.Contains(got.Status.Message, "the manifest said: <<<") || len(got.Status.Message) > 20_000 {
		t.Fatalf("batch %s, message of %d bytes %.60q…: want Failed, the error cut", got.State(), len(got.Status.Message), got.Status.Message)
	}
}

// packager is an assembler whose package is told in full, as the access
// handler's is: its URL and what it holds, written into the token.
type packager struct{ *assembler }

func (h packager) Assemble(ctx context.Context, a *queue.Access) (map[string]any, error) {
	if _, err := h.assembler.Assemble(ctx, a); err != nil {
		return nil, err
	}
	t, err := a.AccessToken()
	if err != nil {
		return nil, err
	}
	t.TokenStatus, t.URL = queue.TokenReady, "https://bucket.s3.example.org/access/"+t.Token+".zip?"+strings.Repeat("X-Amz-Signature=0123456789abcdef&", 40)
	t.Package = &queue.AccessPackage{Name: t.Token + ".zip", Size: 1 << 40, SHA256: strings.Repeat("ab", 32), Entries: 1,
		Expires: "2026-12-05T13:00:00Z", Where: "s3", Location: "s3://bucket/access/" + t.Token + ".zip", Host: "host-a"}
	return t.Map(a.Token), nil
}

// A request the queue takes can be completed: the largest token it
// accepts still has room for the package written into it when done.
// Before, a request created within a few hundred bytes of ZooKeeper's
// packet was refused its move to Completed (ErrTooLarge), left Processing
// and assembled again, without end.
func TestTheLargestAccessRequestTakenCompletes(t *testing.T) {
	e := newEnv(t)
	ends := e.outside("ingestq.access.>")
	tok := func(n int) map[string]any {
		return queue.AccessToken{Token: "t-large", ARK: "ark:/1/large", Format: queue.FormatZip, TokenStatus: queue.TokenNotReady,
			RequestedBy: strings.Repeat("r", n)}.Map(nil)
	}
	// The longest requested_by taken, by bisection: n is taken, over is not.
	n, over := 0, 1<<20
	for over-n > 1 {
		mid := (n + over) / 2
		if _, err := e.q.CreateAccess(t.Context(), queue.AccessLarge, tok(mid)); errors.Is(err, queue.ErrTooLarge) {
			over = mid
		} else if err != nil {
			t.Fatal(err)
		} else {
			n = mid
		}
	}
	a, err := e.q.CreateAccess(t.Context(), queue.AccessSmall, tok(n))
	if err != nil {
		t.Fatal(err)
	}
	h := packager{newAssembler(nil)}
	e.daemon("host-a", func(c *reactor.Config) {
		c.Access, c.AccessWorkers = h, map[string]int{queue.AccessSmall: 1, queue.AccessLarge: 0}
	})
	await(t, h.started, "the request's assembly")
	for done := false; !done; {
		select {
		case ref := <-h.started:
			t.Fatalf("request %s assembled again: its move to Completed was not made", ref)
		case ev := <-ends:
			done = ev.AccessID == a.Ref() && ev.To == string(queue.Completed)
		}
	}
}
