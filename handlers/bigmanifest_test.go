package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// bigManifestFiles is how many files the big object manifest lists.
const bigManifestFiles = 10_000

// TestBigObjectManifest ingests one object of 10,000 small files: every file
// stored once, with its digest, and recorded in the inventory. The time it
// takes is logged, not asserted: it is for the performance notes.
func TestBigObjectManifest(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	// Each file's content is its own path: distinct, and no table to keep.
	many := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/many/") {
			http.NotFound(w, req)
			return
		}
		http.ServeContent(w, req, req.URL.Path, time.Time{}, strings.NewReader(req.URL.Path))
	}))
	t.Cleanup(many.Close)

	want := make(object, bigManifestFiles)
	rows := make([]row, 0, bigManifestFiles)
	for i := range bigManifestFiles {
		p := fmt.Sprintf("/many/f%05d.txt", i)
		name := fmt.Sprintf("d%02d/f%05d.txt", i%100, i) // 100 folders, as real deposits have
		want[name] = []byte(p)
		rows = append(rows, fileRow(many.URL+p, name, []byte(p)))
	}
	start := time.Now()
	b := r.submit(r.content.put("/many.checkm", manifest("mrt-ingest-manifest", rows...)))
	b = r.waitBatch(b.ID, queue.Completed, queue.Failed)
	elapsed := time.Since(start)
	if b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	t.Logf("%d files: submit to Completed in %v", bigManifestFiles, elapsed)
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(jobs))
	}
	// checkStored compares every digest and the count (10,000 + 4 system
	// files: ERC, Dublin Core, PREMIS, the manifest), and the inventory's latest version
	// against storage.
	ark := r.checkStored(jobs["manifest"], want)
	logSteps(t, r, jobs["manifest"].ID)

	detail, err := r.p.Inventory().Object(context.Background(), ark)
	recs := detail.Versions
	if err != nil || len(recs) != 1 {
		t.Fatalf("inventory of %s: %d versions (%v), want 1", ark, len(recs), err)
	}
	producer := 0
	for _, f := range recs[0].Files {
		if strings.HasPrefix(f.Name, "producer/") {
			producer++
		}
	}
	if producer != bigManifestFiles || len(recs[0].Files) != bigManifestFiles+4 {
		t.Errorf("inventory row: %d files, %d producer; want %d and %d", len(recs[0].Files), producer, bigManifestFiles+4, bigManifestFiles)
	}
}

// logSteps logs how long the job spent in each state, from its transition
// events: where the time of a big job goes.
func logSteps(t *testing.T, r *rig, jid string) {
	var last events.Event
	for _, e := range r.jobEvents(jid) {
		if e.Kind != events.KindJob {
			continue
		}
		if last.To != "" {
			t.Logf("%-12s %v", last.To, e.Time.Sub(last.Time).Round(time.Millisecond))
		}
		last = e
	}
}
