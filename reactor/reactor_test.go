package reactor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

// env is one test's queue root, bus and daemons.
type env struct {
	t    *testing.T
	root string
	bus  *events.Bus
	q    *queue.Queue // an operator's session
	log  *slog.Logger
	// ends are the batch ends waitBatch read from a channel while waiting
	// for another batch: batches may end in any order.
	ends map[chan events.Event]map[string]events.Event
}

func newEnv(t *testing.T) *env {
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	bus, err := events.Open(context.Background(), events.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Host: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	e := &env{t: t, root: zktest.Root(t), bus: bus, log: log}
	e.q = e.queue(e.session())
	return e
}

// logged is a daemon's logger, at info, writing to the test's log and to
// logs, whose lines a test reads or waits for.
func (e *env) logged() (logs *logtest.Buffer, log *slog.Logger) {
	logs = &logtest.Buffer{}
	return logs, slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{e.t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (e *env) session() *zkwatch.Session { return queuetest.Session(e.t, e.log) }

func (e *env) queue(s *zkwatch.Session) *queue.Queue {
	return queuetest.Queue(e.t, s, e.root, e.log)
}

// daemon runs a reactor with pass-through handlers until the test ends.
func (e *env) daemon(host string, opts ...func(*reactor.Config)) { e.run(host, nil, opts...) }

// outside subscribes to subject from a separate NATS connection, as a
// service outside the daemon would.
func (e *env) outside(subject string) chan events.Event {
	nc, err := nats.Connect(e.bus.ClientURL())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	ch := make(chan events.Event, 10000)
	_, err = nc.Subscribe(subject, func(m *nats.Msg) {
		var ev events.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			ch <- ev
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return ch
}

// waitBatch waits for the batch's report event (Completed or Failed).
func (e *env) waitBatch(ch chan events.Event, bid string) events.Event {
	e.t.Helper()
	if ev, ok := e.ends[ch][bid]; ok {
		delete(e.ends[ch], bid)
		return ev
	}
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case ev := <-ch:
			if ev.To != "Completed" && ev.To != "Failed" || ev.Kind != events.KindBatch {
				continue
			}
			if ev.BatchID == bid {
				return ev
			}
			if e.ends == nil {
				e.ends = map[chan events.Event]map[string]events.Event{}
			}
			if e.ends[ch] == nil {
				e.ends[ch] = map[string]events.Event{}
			}
			e.ends[ch][ev.BatchID] = ev
		case <-deadline:
			e.t.Fatalf("batch %s did not report", bid)
		}
	}
}

func (e *env) submit(sub map[string]any) *queue.Batch {
	b, err := e.q.CreateBatch(e.t.Context(), queue.SubmissionOf(sub))
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// failedBatch submits a pass-through batch of n jobs whose job fail fails
// in Storing, and returns it once it reported Failed, read after.
func (e *env) failedBatch(batches chan events.Event, n, fail int) (submitted, reported *queue.Batch) {
	e.t.Helper()
	b := e.submit(map[string]any{"payload_url": fmt.Sprintf("passthrough:%d", n), "fail_at": "Storing", "fail_job": fail})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Failed" {
		e.t.Fatalf("batch ended %s, want Failed", rep.To)
	}
	got, err := e.q.LoadBatch(e.t.Context(), b.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return b, got
}

func (e *env) clean() {
	e.t.Helper()
	vs, err := e.q.Check(e.t.Context())
	if err != nil || len(vs) > 0 {
		e.t.Fatalf("check: %v %v", vs, err)
	}
}

var fullTimeline = []string{"Estimating", "Provisioning", "Downloading", "Processing", "Storing", "Recording", "Notify", "Completed"}

// A submitted batch of 200 jobs runs to Completed; an outside subscriber
// hears every job complete and the batch report; the recorded events give
// every job's full timeline.
func TestBatchOf200(t *testing.T) {
	e := newEnv(t)
	completed := e.outside("ingestq.job.completed.*")
	batches := e.outside("ingestq.batch.>")
	e.daemon("host-a")
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:200"})

	rep := e.waitBatch(batches, b.ID)
	if rep.To != "Completed" {
		t.Fatalf("batch ended %s: %s", rep.To, rep.Message)
	}
	got, err := e.q.LoadBatch(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State() != queue.Completed || got.Report == nil || len(got.Report.SuccessfulJobs) != 200 || len(got.Report.FailedJobs) != 0 {
		t.Fatalf("batch %s, report %+v", got.State(), got.Report)
	}
	if n := len(completed); n != 200 {
		t.Fatalf("outside subscriber heard %d job completions, want 200", n)
	}
	e.clean()

	if err := e.bus.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	timelines := map[string][]string{}
	var batchSteps []string
	err = events.Replay(context.Background(), e.bus.Conn(), "", events.Filter{BatchID: b.ID}, func(ev events.Event) error {
		if ev.Kind == events.KindJob {
			timelines[ev.JobID] = append(timelines[ev.JobID], ev.To)
		} else if ev.Kind == events.KindBatch {
			batchSteps = append(batchSteps, ev.From+"→"+ev.To)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(timelines) != 200 {
		t.Fatalf("replay has %d jobs, want 200", len(timelines))
	}
	for jid, tl := range timelines {
		if !slices.Equal(tl, fullTimeline) {
			t.Fatalf("%s timeline %v, want %v", jid, tl, fullTimeline)
		}
	}
	want := []string{"Pending→Processing", "Processing→Reporting", "Reporting→Completed"}
	if !slices.Equal(batchSteps, want) {
		t.Fatalf("batch timeline %v, want %v", batchSteps, want)
	}
}

// A job that fails fails its batch; after a requeue it completes, and an
// operator's report makes the batch Completed.
func TestFailureRequeueReport(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	e.daemon("host-a")
	b, got := e.failedBatch(batches, 5, 2)
	if len(got.Report.FailedJobs) != 1 || len(got.Report.SuccessfulJobs) != 4 {
		t.Fatalf("report %+v", got.Report)
	}
	jid := got.Report.FailedJobs[0]
	j, err := e.q.LoadJob(t.Context(), jid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.Status.Message, "Storing: pass-through failure") || *j.Status.LastSuccessfulStatus != queue.Processing {
		t.Fatalf("failed job: %q, lss %v", j.Status.Message, *j.Status.LastSuccessfulStatus)
	}
	// The cause is "fixed": the job no longer asks to fail (it stays a
	// pass-through job, which a pass-through daemon takes).
	raw, _ := json.Marshal(map[string]any{"object_key": j.Config.Map()["object_key"], "payload_url": j.Config.Map()["payload_url"]})
	if _, err := zktest.Connect(t).Set(e.q.Path("/jobs/"+jid+"/configuration"), raw, -1); err != nil {
		t.Fatal(err)
	}
	jobs := e.outside("ingestq.job.*." + jid)
	to, err := e.q.RequeueJob(t.Context(), jid, "")
	if err != nil || to != queue.Storing {
		t.Fatalf("requeue: %s %v, want Storing", to, err)
	}
	for ev := range jobs {
		if ev.To == "Completed" {
			break
		}
	}
	if _, err := e.q.ReportBatch(t.Context(), b.ID); err != nil {
		t.Fatal(err)
	}
	e.bus.Publish(events.Event{Kind: events.KindAdmin, To: "report", BatchID: b.ID})
	if rep := e.waitBatch(batches, b.ID); rep.To != "Completed" || rep.From != "UpdateReporting" {
		t.Fatalf("after the report: %s → %s, want UpdateReporting → Completed", rep.From, rep.To)
	}
	e.clean()
}

// A retryable failure is retried with backoff and the job goes on; one
// that outlasts its state's attempt limit fails the job, naming the cause.
func TestRetries(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	e.daemon("host-a", func(c *reactor.Config) {
		c.StateAttempts = map[queue.State]int{queue.Recording: 5}
	})
	recovers := e.submit(map[string]any{"payload_url": "passthrough:3", "flaky_at": "Downloading", "flaky_times": 2, "fail_job": 1})
	if rep := e.waitBatch(batches, recovers.ID); rep.To != "Completed" {
		t.Fatalf("2 flaky failures out of 3 attempts: batch %s (%s)", rep.To, rep.Message)
	}
	perState := e.submit(map[string]any{"payload_url": "passthrough:2", "flaky_at": "Recording", "flaky_times": 4})
	if rep := e.waitBatch(batches, perState.ID); rep.To != "Completed" {
		t.Fatalf("4 flaky failures in Recording, which has 5 attempts: batch %s", rep.To)
	}
	exhausted := e.submit(map[string]any{"payload_url": "passthrough:2", "flaky_at": "Downloading", "flaky_times": 5})
	if rep := e.waitBatch(batches, exhausted.ID); rep.To != "Failed" {
		t.Fatalf("5 flaky failures out of 3 attempts: batch %s", rep.To)
	}
	b, err := e.q.LoadBatch(t.Context(), exhausted.ID)
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.q.LoadJob(t.Context(), b.Report.FailedJobs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "Downloading failed after 3 attempts: pass-through flaky failure 3 of 5 in Downloading"
	if j.Status.Message != want || *j.Status.LastSuccessfulStatus != queue.Provisioning {
		t.Fatalf("message %q lss %v, want %q and Provisioning", j.Status.Message, *j.Status.LastSuccessfulStatus, want)
	}
	e.clean()
}

// A collection hold sends its pending batch to Held; a queue hold stops
// acquisition, and its release lets the work go on.
func TestHolds(t *testing.T) {
	e := newEnv(t)
	batches := e.outside("ingestq.batch.>")
	if _, err := e.q.HoldCollection(t.Context(), "frozen"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.HoldQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	e.daemon("host-a")
	waiting := e.submit(map[string]any{"profile_name": "open", "payload_url": "passthrough:3"})
	if _, err := e.q.ReleaseQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	if rep := e.waitBatch(batches, waiting.ID); rep.To != "Completed" {
		t.Fatalf("after the queue's release: batch %s", rep.To)
	}
	frozen := e.submit(map[string]any{"profile_name": "frozen", "payload_url": "passthrough:3"})
	for ev := range batches {
		if ev.BatchID == frozen.ID {
			if ev.To != "Held" {
				t.Fatalf("batch of a held collection went %s → %s, want Held", ev.From, ev.To)
			}
			break
		}
	}
	ids, err := e.q.JobIDs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 {
		t.Fatalf("%d jobs, want only the open batch's 3", len(ids))
	}
	e.clean()
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
