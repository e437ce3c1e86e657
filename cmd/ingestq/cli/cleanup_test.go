package cli_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

// cleanup keeps a batch that completed less than --older-than ago (1 h by
// default), says so, and removes an older one; --dry-run lists what would
// go and removes nothing.
func TestCleanupAgeAndDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	recent, old := e.batch("uuid-recent", "demo"), e.batch("uuid-old", "demo")
	e.moveBatch(recent, queue.Processing, queue.Reporting, queue.Completed)
	e.moveBatch(old, queue.Processing, queue.Reporting, queue.Completed)
	// The old batch completed two hours ago, as its status says.
	st, err := json.Marshal(queue.BatchStatus{Status: queue.Completed, LastModified: time.Now().Add(-2 * time.Hour).Format(queue.TimeLayout)})
	e.ok(err)
	_, err = e.conn.Set(e.q.Path("/batches/"+old+"/status"), st, -1)
	e.ok(err)
	exists := func(bid string) bool {
		_, err := e.q.LoadBatch(t.Context(), bid)
		if err != nil && !errors.Is(err, queue.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	out, _, code := e.run("cleanup", "--dry-run", "--older-than", "0")
	wantCode(t, code, 0)
	for _, want := range []string{"would remove " + recent + "\n", "would remove " + old + "\n", "2 batches would be removed (dry run: nothing was removed)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("cleanup --dry-run --older-than 0: %q lacks %q", out, want)
		}
	}
	if !exists(recent) || !exists(old) {
		t.Fatalf("a dry run removed a batch")
	}
	out, _, code = e.run("cleanup", "--dry-run", "-o", "json")
	wantCode(t, code, 0)
	var got struct {
		DryRun    bool     `json:"dry_run"`
		Removed   []string `json:"removed_batches"`
		Kept      []string `json:"kept_batches"`
		OlderThan string   `json:"older_than"`
	}
	e.ok(json.Unmarshal([]byte(out), &got))
	if !got.DryRun || len(got.Removed) != 1 || got.Removed[0] != old || len(got.Kept) != 1 || got.Kept[0] != recent || got.OlderThan != "1h" {
		t.Errorf("cleanup --dry-run -o json: %+v, want %s to go and %s kept by the default 1h", got, old, recent)
	}

	out, _, code = e.run("cleanup")
	wantCode(t, code, 0)
	if out != "removed "+old+"\n1 Completed batch kept: completed less than 1h ago (--older-than 0 removes them too)\n1 batch removed\n" {
		t.Errorf("cleanup: %q", out)
	}
	if !exists(recent) || exists(old) {
		t.Errorf("after cleanup: %s there %v (want kept), %s there %v (want removed)", recent, exists(recent), old, exists(old))
	}
	_, stderr, code := e.run("cleanup", "--older-than", "-1h")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "--older-than -1h")
	// Days and weeks, as events' --since takes them.
	out, _, code = e.run("cleanup", "--dry-run", "--older-than", "7d")
	wantCode(t, code, 0)
	if !strings.Contains(out, "completed less than 168h ago") {
		t.Errorf("cleanup --dry-run --older-than 7d: %q, want the recent batch kept by 168h", out)
	}
	_, _, code = e.run("cleanup", "--older-than", "7x")
	wantCode(t, code, 2)
	out, _, code = e.run("cleanup", "--older-than", "0")
	wantCode(t, code, 0)
	if out != "removed "+recent+"\n1 batch removed\n" || exists(recent) {
		t.Errorf("cleanup --older-than 0: %q", out)
	}
}

// A ref Merritt's Job.load wrote back beside a Completed job's own is
// kept while younger than 10 minutes, and cleanup says so (the queue's
// tests age it and see it removed).
func TestCleanupKeepsYoungLeftRefs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bid := e.batch("uuid-left", "demo")
	e.moveBatch(bid, queue.Processing)
	jid := e.job(bid, 5, "demo")
	e.moveJob(jid, "", queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing, queue.Recording, queue.Notify, queue.Completed)
	left := e.q.Path("/jobs/states/storing/05-" + jid)
	_, err := e.conn.Create(left, nil, 0, zk.WorldACL(zk.PermAll))
	e.ok(err)

	out, _, code := e.run("cleanup")
	wantCode(t, code, 0)
	if !strings.Contains(out, "1 left ref kept: changed less than 10m ago, or its job is locked (a move may be under way)\n") {
		t.Errorf("cleanup: %q, want the left ref kept", out)
	}
	out, _, code = e.run("cleanup", "-o", "json")
	wantCode(t, code, 0)
	var got struct {
		Removed []queue.LeftRef `json:"left_refs_removed"`
		Kept    int             `json:"left_refs_kept"`
	}
	e.ok(json.Unmarshal([]byte(out), &got))
	if len(got.Removed) != 0 || got.Kept != 1 {
		t.Errorf("cleanup -o json: %+v, want 1 left ref kept", got)
	}
	if ok, _, err := e.conn.Exists(left); err != nil || !ok {
		t.Errorf("the young left ref went (%v)", err)
	}
}
