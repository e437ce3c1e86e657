package handlers

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A job's waits in a row for its object are forgotten once the watch of
// its end (look, under tend) sees it failed or gone, and kept while it is
// in the pipeline. They stayed for ever for a job failed or deleted while
// it waited (decision 668 (c)).
func TestObjectWaitsEndWithTheJob(t *testing.T) {
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(logtest.NewT(t), nil))
	q := queuetest.Queue(t, queuetest.Session(t, log), zktest.Root(t), log)
	closing, stop := context.WithCancel(ctx)
	defer stop()
	p := &Pipeline{q: q, log: log, closing: closing}
	b, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile_name": "demo"}))
	if err != nil {
		t.Fatal(err)
	}
	if b, _, err = q.AcquirePendingBatch(ctx, func(x *queue.Batch) bool { return x.ID == b.ID }); err != nil {
		t.Fatal(err)
	}
	newJob := func() string {
		t.Helper()
		j, err := q.CreateJob(ctx, b, queue.JobSpec{Priority: 5})
		if err != nil {
			t.Fatal(err)
		}
		p.jobWaits.Store(j.ID, waitsInRow{n: 3})
		return j.ID
	}
	waits := func(jid, when string, want bool) {
		t.Helper()
		if _, err := p.look(jid, filepath.Join(t.TempDir(), jid)); err != nil {
			t.Fatal(err)
		}
		if _, has := p.jobWaits.Load(jid); has != want {
			t.Errorf("job %s %s: waits kept %v, want %v", jid, when, has, want)
		}
	}
	failed, purged := newJob(), newJob()
	waits(failed, "in the pipeline", true)
	if err := q.FailJob(ctx, failed, "", false); err != nil {
		t.Fatal(err)
	}
	waits(failed, "failed", false)
	if err := q.FailJob(ctx, purged, "", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.DeleteJob(ctx, purged, true); err != nil {
		t.Fatal(err)
	}
	waits(purged, "purged", false)
}
