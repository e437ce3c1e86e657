package cli_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

// holds lists everything held, not only the queue and collection holds:
// the Held batches and jobs too, each with since when, what its hold stops
// and the command that releases it (its collection's release first while
// that is held). Following the commands it gives releases them.
func TestHoldsListsEverythingHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publishDemo()
	for _, args := range [][]string{{"hold", "job", f.p1}, {"hold", "batch", f.b2}, {"hold", "collection", "demo"}, {"hold", "queue", "access-large"}} {
		_, _, code := f.run(args...)
		wantCode(t, code, 0)
	}
	j, err := f.q.LoadJob(t.Context(), f.p1)
	f.ok(err)
	b, err := f.q.LoadBatch(t.Context(), f.b2)
	f.ok(err)

	out, _, code := f.run("holds")
	wantCode(t, code, 0)
	header, rows := tableRows(t, out)
	if !slices.Equal(header, []string{"KIND", "NAME", "SINCE", "EFFECT", "RELEASE WITH"}) {
		t.Errorf("holds header %q, want what each hold stops and how to release it", header)
	}
	want := [][]string{
		{"queue", queue.QueueAccessLarge, "ingestq release queue access-large"},
		{"collection", "demo", "ingestq release collection demo"},
		{"batch", f.b2, "ingestq release batch " + f.b2},
		{"job", f.p1, "ingestq release collection demo, then ingestq release job " + f.p1},
	}
	if len(rows) != len(want) {
		t.Fatalf("holds lists %d things, want %d:\n%s", len(rows), len(want), out)
	}
	for i, w := range want {
		if r := rows[i]; len(r) != 5 || r[0] != w[0] || r[1] != w[1] || r[4] != w[2] {
			t.Errorf("holds row %q, want %s %s released by %q", r, w[0], w[1], w[2])
		}
	}
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)
	for _, r := range rows {
		if !stamp.MatchString(r[2]) {
			t.Errorf("holds row %q: SINCE is no time", r)
		}
	}
	if rows[2][2] != localStamp(t, b.Status.LastModified) || rows[3][2] != localStamp(t, j.Status.LastModified) {
		t.Errorf("a Held batch or job is held since it went to Held (%s, %s):\n%s", b.Status.LastModified, j.Status.LastModified, out)
	}
	if !strings.Contains(rows[3][3], "no daemon takes it") || !strings.Contains(rows[3][3], "collection demo is held") ||
		!strings.Contains(rows[2][3], "no daemon makes its jobs") {
		t.Errorf("holds does not say what each hold stops:\n%s", out)
	}

	out, _, code = f.run("holds", "-o", "json")
	wantCode(t, code, 0)
	var items []struct {
		Kind, Name, Effect, Release string
		Since                       *time.Time
	}
	f.ok(json.Unmarshal([]byte(out), &items))
	if len(items) != 4 || items[3].Kind != "job" || items[3].Name != f.p1 || items[3].Since == nil ||
		items[3].Release != "ingestq release collection demo, then ingestq release job "+f.p1 || items[2].Kind != "batch" {
		t.Fatalf("holds -o json:\n%s", out)
	}
	for _, it := range items {
		if it.Since == nil || time.Since(*it.Since) > time.Hour || it.Effect == "" {
			t.Errorf("holds -o json item %+v: want since when and what it stops", it)
		}
	}

	// The commands holds gives release what it lists.
	for _, r := range rows {
		for _, line := range strings.Split(r[4], ", then ") {
			_, _, code := f.run(strings.Fields(strings.TrimPrefix(line, "ingestq "))...)
			wantCode(t, code, 0)
		}
	}
	out, _, code = f.run("holds")
	wantCode(t, code, 0)
	if out != "nothing is held\n" {
		t.Errorf("holds after each release it named:\n%s", out)
	}
	if f.jobState(f.p1) != queue.Pending || f.batchState(f.b2) != queue.Pending {
		t.Error("the job and the batch are not released")
	}
}

// show and ls say of a Held job since when it is held, what that stops
// and the command that releases it, whole: ls cut it after 48 characters,
// in the middle of the command; and while its collection is held, that
// the collection is released first.
func TestHeldJobSaysHowToReleaseIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publishDemo()
	_, _, code := f.run("hold", "job", f.p1)
	wantCode(t, code, 0)
	j, err := f.q.LoadJob(t.Context(), f.p1)
	f.ok(err)
	since := localStamp(t, j.Status.LastModified)

	holdLine := func() string {
		t.Helper()
		out, _, code := f.run("show", f.p1)
		wantCode(t, code, 0)
		m := regexp.MustCompile(`(?m)^hold: +(.*)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("show %s has no hold line:\n%s", f.p1, out)
		}
		return m[1]
	}
	if got, want := holdLine(), "held since "+since+": no daemon takes it until `ingestq release job "+f.p1+"`"; got != want {
		t.Errorf("show's hold %q, want %q", got, want)
	}
	lsMessage := func() string {
		t.Helper()
		out, _, code := f.run("ls", "jobs", "--state", "held")
		wantCode(t, code, 0)
		_, rows := tableRows(t, out)
		if len(rows) != 1 || len(rows[0]) < 8 {
			t.Fatalf("ls jobs --state held:\n%s", out)
		}
		return rows[0][7]
	}
	if got, want := lsMessage(), "held: ingestq release job "+f.p1; got != want {
		t.Errorf("ls jobs MESSAGE %q, want %q", got, want)
	}

	_, _, code = f.run("hold", "collection", "demo")
	wantCode(t, code, 0)
	holds, err := f.q.Holds(t.Context())
	f.ok(err)
	collSince := holds[0].Since.Local().Format(time.DateTime)
	want := "held since " + since + ": no daemon takes it; its collection demo is held too (since " + collSince +
		"): `ingestq release collection demo`, then `ingestq release job " + f.p1 + "`"
	if got := holdLine(); got != want {
		t.Errorf("show's hold %q, want %q", got, want)
	}
	if got, want := lsMessage(), "held: ingestq release collection demo, then ingestq release job "+f.p1; got != want {
		t.Errorf("ls jobs MESSAGE %q, want %q", got, want)
	}
	// A stalled Held job's reason says no door; the CLI's listing adds its
	// own command lines.
	out, _, code := f.run("ls", "jobs", "--stalled", "--stalled-after", "1ms", "-o", "json")
	wantCode(t, code, 0)
	var stalls []struct{ JID, Reason string }
	f.ok(json.Unmarshal([]byte(out), &stalls))
	want = "held: no daemon takes it until it is released: ingestq release collection demo, then ingestq release job " + f.p1
	if i := slices.IndexFunc(stalls, func(s struct{ JID, Reason string }) bool { return s.JID == f.p1 }); i < 0 || stalls[i].Reason != want {
		t.Errorf("ls jobs --stalled: %+v, want %s's reason %q", stalls, f.p1, want)
	}
}

// localStamp is a node's last_modified as the CLI prints times.
func localStamp(t *testing.T, stamp string) string {
	t.Helper()
	at, err := time.Parse(queue.TimeLayout, stamp)
	if err != nil {
		t.Fatal(err)
	}
	return at.Local().Format(time.DateTime)
}

// A queue hold another program set (a name that is none of ingestq's
// queues) is listed as that program's to release. holds said `ingestq
// release queue`, which lifts the ingest queue's hold instead, and -o json
// (as the API) the same.
func TestForeignQueueHoldIsNotOursToRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.conn.Create(e.q.Path("/locks/queue/mrtPause"), nil, 0, zk.WorldACL(zk.PermAll))
	e.ok(err)
	_, _, code := e.run("hold", "queue", "ingest")
	wantCode(t, code, 0)
	const want = "by the program that set it (ingestq releases only the queues ingest, accessSmall, accessLarge)"

	out, _, code := e.run("holds")
	wantCode(t, code, 0)
	_, rows := tableRows(t, out)
	if len(rows) != 2 || rows[1][1] != "mrtPause" || rows[1][4] != want || rows[0][4] != "ingestq release queue" {
		t.Errorf("holds, want the foreign hold released %q and ingest's by its command:\n%s", want, out)
	}
	out, _, code = e.run("holds", "-o", "json")
	wantCode(t, code, 0)
	var items []struct{ Name, Release string }
	e.ok(json.Unmarshal([]byte(out), &items))
	if len(items) != 2 || items[1].Name != "mrtPause" || items[1].Release != want {
		t.Errorf("holds -o json, want the foreign hold released %q:\n%s", want, out)
	}
}
