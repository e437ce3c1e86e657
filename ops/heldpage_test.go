package ops

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A listing of the batches in one state reads only the status of each
// batch in another: with 1,000 batches in the queue, a page of the Held
// ones (the holds listing, ?state=) read all seven nodes of every batch
// (7,000 reads) to find them.
func TestStateFilterReadsOnlyOthersStatus(t *testing.T) {
	t.Parallel()
	var zkLog logtest.Buffer
	log := slog.New(slog.NewTextHandler(&zkLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	q := queuetest.Queue(t, queuetest.Session(t, slog.New(slog.DiscardHandler)), zktest.Root(t), log)
	var held string
	for i := range 5 {
		b, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile": "demo"}))
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			held = b.ID
			if _, err := q.HoldBatch(t.Context(), b.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	mark := len(zkLog.Lines("zookeeper request"))
	list, err := (&Service{Q: q}).ListBatches(t.Context(), BatchFilter{State: queue.Held}, Page{})
	if err != nil || len(list.Batches) != 1 || list.Batches[0].ID != held {
		t.Fatalf("Held batches: %+v, %v; want %s", list.Batches, err, held)
	}
	others := 0
	for _, l := range zkLog.Lines("zookeeper request")[mark:] {
		if strings.Contains(l, "/batches/bid") && !strings.Contains(l, "/batches/"+held+"/") {
			others += strings.Count(l, "/batches/bid")
		}
	}
	if others != 4 {
		t.Errorf("listing the Held batch read %d nodes of the 4 others; want their status alone (4)", others)
	}
}

// The holds listing is paged: the queue and collection holds first, then
// the Held batches, then the Held jobs; each page at most its limit of
// batches and jobs, its next the cursor of the page after. It listed and
// read every Held job at once: 6,000 Held jobs (a held collection's
// window) took 14 s and 1.2 MB.
func TestHeldItemsArePaged(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t)
	ctx := t.Context()
	if _, err := q.HoldQueue(ctx, queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	b, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile": "demo"}))
	if err != nil {
		t.Fatal(err)
	}
	var want []string // kind name, in order
	for range 2 {
		hb, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile": "demo"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.HoldBatch(ctx, hb.ID); err != nil {
			t.Fatal(err)
		}
		want = append(want, "batch "+hb.ID)
	}
	for range 3 {
		j, err := q.CreateJob(ctx, b, queue.JobSpec{Priority: 5, Config: queue.JobConfig{PayloadURL: "foreign:1"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.HoldJob(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		want = append(want, "job "+j.ID)
	}
	s := &Service{Q: q}
	var got []string
	var pages []int
	p := Page{Limit: 2}
	for {
		items, next, problems, err := s.HeldItems(ctx, HTTP, p)
		if err != nil || len(problems) > 0 {
			t.Fatalf("HeldItems(%+v): %v, %v", p, problems, err)
		}
		n := 0
		for _, it := range items {
			if it.Kind == "queue" {
				if p.After != "" {
					t.Errorf("page after %s lists the queue hold again", p.After)
				}
				continue
			}
			got = append(got, it.Kind+" "+it.Name)
			n++
		}
		pages = append(pages, n)
		if n > p.Limit || len(pages) > 5 {
			t.Fatalf("pages of %v items for limit %d", pages, p.Limit)
		}
		if next == "" {
			break
		}
		p.After = next
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("held, page by page %v:\n%s\nwant\n%s", pages, strings.Join(got, ", "), strings.Join(want, ", "))
	}
	all, next, _, err := s.HeldItems(ctx, CLI, Page{})
	if err != nil || next != "" || len(all) != 1+len(want) {
		t.Errorf("all held at once (the CLI's): %d items, next %q, %v; want %d", len(all), next, err, 1+len(want))
	}
}

// Pages follow the refs as the Held folder lists them: a ref a foreign
// tree filed under another priority than its job's (ingestq check names
// it) was the page's next as the job's priority would name it, and the
// page after began there, skipping the refs between.
func TestHeldPagesFollowTheListedRefs(t *testing.T) {
	t.Parallel()
	q, s := newQueue(t)
	ctx := t.Context()
	b, err := q.CreateBatch(ctx, queue.SubmissionOf(map[string]any{"profile": "demo"}))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, prio := range []int{5, 3, 5} {
		j, err := q.CreateJob(ctx, b, queue.JobSpec{Priority: prio, Config: queue.JobConfig{PayloadURL: "foreign:1"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.HoldJob(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		want = append(want, "job "+j.ID)
	}
	// The first job's ref filed under priority 01, as a foreign tree may.
	held := "/jobs/states/" + queue.Held.Folder() + "/"
	jid := strings.TrimPrefix(want[0], "job ")
	if err := s.Conn.Delete(q.Path(held+"05-"+jid), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conn.Create(q.Path(held+"01-"+jid), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var got []string
	p := Page{Limit: 1}
	for range len(want) + 1 {
		items, next, _, err := (&Service{Q: q}).HeldItems(ctx, HTTP, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			got = append(got, it.Kind+" "+it.Name)
		}
		if p.After = next; next == "" {
			break
		}
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("Held jobs, a page of one at a time: %s; want %s (01-, 03-, 05- as listed)", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

// A batch whose status is missing (a creation cut short, or another
// program's under way) is a problem of a listing by state, as of a
// listing of all: its state is unknown, so it may be the state asked.
// The status read alone took it for a batch gone, and left it unsaid.
func TestStateFilterReportsABatchWithoutStatus(t *testing.T) {
	t.Parallel()
	q, s := newQueue(t)
	b, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile": "demo"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Conn.Delete(q.Path("/batches/"+b.ID+"/status"), -1); err != nil {
		t.Fatal(err)
	}
	list, err := (&Service{Q: q}).ListBatches(t.Context(), BatchFilter{State: queue.Held}, Page{})
	if err != nil || len(list.Batches) != 0 || len(list.Problems) != 1 ||
		!strings.Contains(list.Problems[0].Error(), "/batches/"+b.ID+"/status") {
		t.Errorf("Held batches: %v, problems %v, %v; want none, and the problem of %s's missing status", list.Batches, list.Problems, err, b.ID)
	}
}
