package cli_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Every command prints an absolute time one way: in the local zone, to the
// second, "2006-01-02 15:04:05", whatever layout and zone it is kept in
// (Merritt's last_modified written in another zone, an access token's
// RFC 3339, a node's creation, the inventory's times); -o json gives
// RFC 3339 in UTC.
func TestTimesReadAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDemo()
	// Stamps written by a host in another zone than this machine's.
	zone := time.FixedZone("IST", 5*3600+1800)
	if _, off := time.Now().Zone(); off == 5*3600+1800 {
		zone = time.FixedZone("EST", -5*3600)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, zone)
	local, utc := at.Local().Format(time.DateTime), at.UTC().Format(time.RFC3339)

	bid := e.batch("uuid-times", "demo")
	jid := e.job(bid, 5, "demo")
	b, err := e.q.LockBatch(t.Context(), bid)
	e.ok(err)
	e.ok(e.q.SetBatchStatus(t.Context(), b, queue.Held, queue.BatchChange{At: at, Release: true}))
	j, err := e.q.LockJob(t.Context(), jid)
	e.ok(err)
	e.ok(e.q.SetJobStatus(t.Context(), j, queue.Held, queue.JobChange{At: at, Release: true}))
	e.ok(e.q.RegisterHost(t.Context(), "host1", []byte(`{"name":"host1","pid":1}`)))
	_, _, code := e.run("hold", "queue")
	wantCode(t, code, 0)
	acc, err := e.q.CreateAccess(t.Context(), queue.AccessSmall, map[string]any{"ark": "ark:/99999/fk4times", "format": "zip",
		"requested": at.Format(time.RFC3339), "package": map[string]any{"name": "p.zip", "expires": at.Format(time.RFC3339)}})
	e.ok(err)
	db := filepath.Join(t.TempDir(), "inventory.db")
	recordObject(t, db, "ark:/99999/fk4times", "demo", "times-1") // created 2025-03-01 12:00 UTC
	created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).Local().Format(time.DateTime)

	text := func(args ...string) string {
		t.Helper()
		out, _, code := e.run(args...)
		wantCode(t, code, 0)
		// Anything like a date and time is one: no T, no fraction, no zone.
		for _, s := range regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:\d\d| [+-]\d{4})?`).FindAllString(out, -1) {
			if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(s) {
				t.Errorf("%v prints the time %q: want 2006-01-02 15:04:05, local", args, s)
			}
		}
		return out
	}
	line := func(out, key string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `: +(.*)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s line in:\n%s", key, out)
		}
		return m[1]
	}
	if _, rows := tableRows(t, text("ls", "batches")); len(rows) != 1 || rows[0][5] != local {
		t.Errorf("ls batches LAST MODIFIED %q, want %s", rows, local)
	}
	if got := line(text("show", bid), "last_modified"); got != local {
		t.Errorf("show BID last_modified %q, want %s", got, local)
	}
	out := text("show", jid)
	if got := line(out, "last_modified"); got != local {
		t.Errorf("show JID last_modified %q, want %s", got, local)
	}
	if got := line(out, "hold"); !strings.HasPrefix(got, "held since "+local+": ") {
		t.Errorf("show JID hold %q: want it held since %s", got, local)
	}
	_, rows := tableRows(t, text("holds"))
	if len(rows) != 3 || rows[1][2] != local || rows[2][2] != local {
		t.Errorf("holds: %q, want the batch and the job held since %s", rows, local)
	}
	text("hosts")
	text("ls", "jobs")
	out = text("access", "show", acc.Ref())
	if line(out, "requested") != local || line(out, "expires") != local {
		t.Errorf("access show's times are not %s:\n%s", local, out)
	}
	text("access", "ls")
	if out := text("object", "--inventory", db, "ark:/99999/fk4times"); !strings.Contains(out, "created "+created+" ") {
		t.Errorf("object does not say it was created %s:\n%s", created, out)
	}
	// check's old lock: held since the lock node's creation.
	locked, err := e.q.LockJob(t.Context(), jid)
	e.ok(err)
	read, err := e.q.LoadJob(t.Context(), jid)
	e.ok(err)
	locked.LockedAt = read.LockedAt // the lock node's creation
	lockedAt := locked.LockedAt.Local().Format(time.DateTime)
	if got := line(text("check", "--lock-age", "1ns"), "warning: /jobs/"+jid+"/lock"); !strings.HasSuffix(got, ", since "+lockedAt) {
		t.Errorf("check's old lock %q: want it held since %s", got, lockedAt)
	}
	var checked struct {
		Warnings []struct {
			Path  string `json:"path"`
			Since string `json:"since"`
		} `json:"warnings"`
	}
	out, _, code = e.run("check", "--lock-age", "1ns", "-o", "json")
	wantCode(t, code, 0)
	e.ok(json.Unmarshal([]byte(out), &checked))
	if len(checked.Warnings) != 1 || checked.Warnings[0].Since != locked.LockedAt.UTC().Format(time.RFC3339) {
		t.Errorf("check -o json: %s, want the lock's since %s", out, locked.LockedAt.UTC().Format(time.RFC3339))
	}
	e.ok(e.q.UnlockJob(t.Context(), locked))

	// -o json: RFC 3339, in UTC.
	var shown struct {
		LastModified string `json:"last_modified"`
	}
	for _, args := range [][]string{{"show", jid}, {"show", bid}} {
		out, _, code := e.run(append(args, "-o", "json")...)
		wantCode(t, code, 0)
		e.ok(json.Unmarshal([]byte(out), &shown))
		if shown.LastModified != utc {
			t.Errorf("%v -o json: last_modified %q, want %s", args, shown.LastModified, utc)
		}
	}
	var rowsJSON []struct {
		LastModified string `json:"last_modified"`
	}
	for _, args := range [][]string{{"ls", "batches"}, {"ls", "jobs"}} {
		out, _, code := e.run(append(args, "-o", "json")...)
		wantCode(t, code, 0)
		e.ok(json.Unmarshal([]byte(out), &rowsJSON))
		if len(rowsJSON) != 1 || rowsJSON[0].LastModified != utc {
			t.Errorf("%v -o json: %s, want last_modified %s", args, out, utc)
		}
	}
	out, _, code = e.run("access", "show", acc.Ref(), "-o", "json")
	wantCode(t, code, 0)
	e.ok(json.Unmarshal([]byte(out), &shown))
	if _, err := time.Parse(time.RFC3339, shown.LastModified); err != nil || !strings.HasSuffix(shown.LastModified, "Z") {
		t.Errorf("access show -o json: last_modified %q, want RFC 3339 in UTC", shown.LastModified)
	}
}
