package cli

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Jobs whose events out of Provisioning were lost (a NATS reconnect) stay
// in the tally as waiting there. They have waited longest, so they are read
// first: one poll reads on past them to a job the daemon holds for room,
// and notes that one, counting only it.
func TestNoteRoomReadsPastJobsThatWentOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := newQueue(t)
	b, err := q.CreateBatch(ctx, queue.Submission{Profile: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	// move takes a new job through the states to the last of them, with
	// message on the last.
	move := func(message string, through ...queue.State) string {
		j, err := q.CreateJob(ctx, b, queue.JobSpec{Priority: queue.DefaultPriority})
		if err != nil {
			t.Fatal(err)
		}
		for i, to := range through {
			if j, err = q.LoadJob(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			c := queue.JobChange{}
			if i == len(through)-1 {
				c.Message = message
			}
			if err := q.SetJobStatus(ctx, j, to, c); err != nil {
				t.Fatal(err)
			}
		}
		return j.ID
	}
	var logs logtest.Buffer
	f := &follower{a: &app{logs: &gate{w: &logs}, log: slog.New(slog.DiscardHandler)}, q: q, bid: b.ID,
		t: newTally(), roomNoted: map[string]bool{}}
	const wentOn = 5
	start := time.Now().Add(-time.Hour)
	for i := range wentOn {
		jid := move("", queue.Estimating, queue.Provisioning, queue.Downloading)
		f.t.set(jid, string(queue.Provisioning)) // the event out of it lost
		f.t.waiting[queue.Provisioning][jid] = start.Add(time.Duration(i) * time.Second)
	}
	const message = "waiting for room: 85% full, --max-fill 80% (with the job; 15360 MiB free, needs 0 MiB + 64 MiB margin)"
	held := move(message, queue.Estimating, queue.Provisioning)
	f.t.set(held, string(queue.Provisioning))
	f.t.waiting[queue.Provisioning][held] = start.Add(time.Minute)

	f.noteRoom(ctx)
	want := "note: 1 job of batch " + b.ID + " waits in Provisioning: " + message + "; " + roomAdvice["--max-fill"] + "\n"
	if got := logs.String(); got != want {
		t.Errorf("after one poll: %q\nwant the note %q", got, want)
	}
	if jid, _, _ := f.t.longestIn(queue.Provisioning); jid != held || len(f.t.waiting[queue.Provisioning]) != 1 {
		t.Errorf("in Provisioning after the poll: %v; want only %s", f.t.waiting[queue.Provisioning], held)
	}
}
