package cli_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

func TestTreeText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("tree")
	wantCode(t, code, 0)
	for _, want := range []string{
		"/batches/" + f.b1 + "/submission: {\"batchID\":\"uuid-b1\",\"profile_name\":\"demo\",\"submitter\":\"tester\"}\n",
		"/batch-uuids/uuid-b1: " + f.b1 + "\n",
		"/jobs/" + f.p2 + "/priority: 2\n",
		"/jobs/" + f.p1 + "/bid: " + f.b1 + "\n",
		"/jobs/states/pending/02-" + f.p2 + ": null\n",
		"/jobs/states/failed/05-" + f.failed + ": null\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tree lacks %q", want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !regexp.MustCompile(`^/\S+: `).MatchString(line) {
			t.Errorf("line %q is not `path: value`", line)
		}
	}

	sub, _, code := f.run("tree", "/jobs/"+f.p1)
	wantCode(t, code, 0)
	if !strings.HasPrefix(sub, "/jobs/"+f.p1+"/") || strings.Contains(sub, f.p2) || strings.Contains(sub, "/batches") {
		t.Errorf("tree of one job:\n%s", sub)
	}
}

func TestTreeJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("tree", "-o", "json")
	wantCode(t, code, 0)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("tree -o json is not a JSON object: %v", err)
	}
	if v, ok := m["/jobs/states/pending/05-"+f.p1]; !ok || v != nil {
		t.Errorf("ref of p1: %v (present %v), want null", v, ok)
	}
	if m["/jobs/"+f.p2+"/priority"] != 2.0 {
		t.Errorf("priority of p2: %#v, want 2", m["/jobs/"+f.p2+"/priority"])
	}
	sub, _ := m["/batches/"+f.b1+"/submission"].(map[string]any)
	if sub["profile_name"] != "demo" {
		t.Errorf("submission of b1: %#v", m["/batches/"+f.b1+"/submission"])
	}
	status, _ := m["/jobs/"+f.failed+"/status"].(map[string]any)
	if status["status"] != "Failed" || status["message"] != "download timed out" {
		t.Errorf("status of the failed job: %#v", status)
	}
}

// tableRows parses tabwriter output into header and rows of fields.
func tableRows(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	split := regexp.MustCompile(`\s{2,}`)
	for i, l := range lines {
		f := split.Split(strings.TrimSpace(l), -1)
		if i == 0 {
			header = f
		} else {
			rows = append(rows, f)
		}
	}
	return header, rows
}

func column(rows [][]string, i int) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[i])
	}
	return out
}

func TestLsBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.moveBatch(f.b2, "Held")
	out, stderr, code := f.run("ls", "batches")
	wantCode(t, code, 0)
	if stderr != "" {
		t.Errorf("stderr: %q", stderr)
	}
	header, rows := tableRows(t, out)
	if !slices.Equal(header, []string{"BID", "STATUS", "UUID", "PROFILE", "JOBS", "LAST MODIFIED"}) {
		t.Fatalf("header %q", header)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	want := []string{f.b1, "Pending", "uuid-b1", "demo", "2 unfinished, 1 failed"}
	if !slices.Equal(rows[0][:5], want) {
		t.Errorf("row of b1 %q, want %q…", rows[0], want)
	}
	if rows[1][0] != f.b2 || rows[1][1] != "Held" || rows[1][4] != "1 unfinished" {
		t.Errorf("row of b2 %q", rows[1])
	}

	out, _, code = f.run("ls", "batches", "--state", "held")
	wantCode(t, code, 0)
	if _, rows = tableRows(t, out); !slices.Equal(column(rows, 0), []string{f.b2}) {
		t.Errorf("--state held lists %q, want only %s", column(rows, 0), f.b2)
	}

	out, _, code = f.run("ls", "batches", "-o", "json")
	wantCode(t, code, 0)
	var list []struct {
		BID  string              `json:"bid"`
		Jobs map[string][]string `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 {
		t.Fatalf("ls batches -o json: %v, %d entries", err, len(list))
	}
	if !slices.Equal(list[0].Jobs["batch-failed"], []string{f.failed}) {
		t.Errorf("json jobs of b1: %v", list[0].Jobs)
	}

	// An empty listing says so (and -o json is an empty list).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "batches", "--state", "failed"}, "no Failed batches\n"},
		{[]string{"ls", "jobs", "--state", "completed"}, "no Completed jobs\n"},
		{[]string{"ls", "jobs", "--batch", f.b2, "--state", "failed"}, "no Failed jobs match\n"},
		{[]string{"access", "ls"}, "no access requests\n"},
		{[]string{"ls", "jobs", "--state", "completed", "-o", "json"}, "[]\n"},
	} {
		out, _, code = f.run(c.args...)
		wantCode(t, code, 0)
		if out != c.want {
			t.Errorf("%v: %q, want %q", c.args, out, c.want)
		}
	}

	_, stderr, code = f.run("ls", "batches", "--state", "nonsense")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "nonsense")
}

func TestLsJobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("ls", "jobs")
	wantCode(t, code, 0)
	header, rows := tableRows(t, out)
	if !slices.Equal(header, []string{"JID", "BID", "STATUS", "PRIORITY", "PROFILE", "REQUEUES", "ATTEMPTS", "MESSAGE", "LOCKED", "ARK", "LOCAL ID", "TITLE"}) {
		t.Fatalf("header %q", header)
	}
	if got, want := column(rows, 0), []string{f.p1, f.p2, f.failed, f.o1}; !slices.Equal(got, want) {
		t.Fatalf("jobs %q, want %q", got, want)
	}
	if want := []string{f.failed, f.b1, "Failed", "5", "demo", "0", "-", "download timed out", "no", "ark:/99999/fk4test", "loc-1", "A test object"}; !slices.Equal(rows[2], want) {
		t.Errorf("row %q, want %q", rows[2], want)
	}

	// --state lists in acquisition order: priority first.
	out, _, code = f.run("ls", "jobs", "--state", "PENDING")
	wantCode(t, code, 0)
	if _, rows = tableRows(t, out); !slices.Equal(column(rows, 0), []string{f.p2, f.p1, f.o1}) {
		t.Errorf("--state PENDING: %q", column(rows, 0))
	}
	out, _, code = f.run("ls", "jobs", "--state", "pending", "--batch", f.b2)
	wantCode(t, code, 0)
	if _, rows = tableRows(t, out); !slices.Equal(column(rows, 0), []string{f.o1}) {
		t.Errorf("--state pending --batch b2: %q", column(rows, 0))
	}
	// A batch uuid works as --batch too.
	out, _, code = f.run("ls", "jobs", "--batch", "uuid-b1", "-o", "json")
	wantCode(t, code, 0)
	var list []struct {
		JID    string `json:"jid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[2].JID != f.failed || list[2].Status != "Failed" {
		t.Errorf("--batch uuid-b1 -o json: %+v", list)
	}

	_, stderr, code := f.run("ls", "jobs", "--batch", "bid0000099999")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "bid0000099999", "not found")

	// An object is found by its local id or its ARK.
	j, err := f.q.LoadJob(t.Context(), f.o1)
	f.ok(err)
	f.ok(f.q.UpdateJob(t.Context(), j, queue.JobChange{Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4other", LocalIDs: []string{"loc-2"}}}))
	for _, c := range []struct{ flag, value string }{{"--local-id", "loc-2"}, {"--ark", "ark:/99999/fk4other"}} {
		out, _, code = f.run("ls", "jobs", c.flag, c.value)
		wantCode(t, code, 0)
		if _, rows = tableRows(t, out); !slices.Equal(column(rows, 0), []string{f.o1}) {
			t.Errorf("%s %s: %q, want %s", c.flag, c.value, column(rows, 0), f.o1)
		}
	}
	out, _, code = f.run("ls", "jobs", "--local-id", "loc-2", "-o", "json")
	wantCode(t, code, 0)
	var objs []struct {
		ARK      string   `json:"ark"`
		LocalIDs []string `json:"local_id"`
		Title    string   `json:"title"`
	}
	if err := json.Unmarshal([]byte(out), &objs); err != nil || len(objs) != 1 || objs[0].ARK != "ark:/99999/fk4other" ||
		!slices.Equal(objs[0].LocalIDs, []string{"loc-2"}) || objs[0].Title != "A test object" {
		t.Errorf("--local-id loc-2 -o json: %s (%v)", out, err)
	}
}

func TestLsJobsCorruptJobIsAWarning(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.conn.Set(f.root+"/jobs/"+f.p2+"/status", []byte("{not json"), -1)
	f.ok(err)
	out, stderr, code := f.run("ls", "jobs")
	wantCode(t, code, 0)
	if _, rows := tableRows(t, out); !slices.Equal(column(rows, 0), []string{f.p1, f.failed, f.o1}) {
		t.Errorf("listed %q, want every job but the corrupt one", column(rows, 0))
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "WRN") || !strings.Contains(lines[0], "/jobs/"+f.p2+"/status") {
		t.Errorf("stderr %q: want one warning naming the corrupt status node", stderr)
	}
	// The jobs of a batch whose status is unreadable can still be listed.
	_, err = f.conn.Set(f.root+"/batches/"+f.b2+"/status", []byte("{"), -1)
	f.ok(err)
	out, stderr, code = f.run("ls", "jobs", "--batch", f.b2)
	wantCode(t, code, 0)
	if _, rows := tableRows(t, out); !slices.Equal(column(rows, 0), []string{f.o1}) {
		t.Errorf("--batch of an unreadable batch lists %q", column(rows, 0))
	}
	if !strings.Contains(stderr, "/batches/"+f.b2+"/status") {
		t.Errorf("no warning for the unreadable batch: %q", stderr)
	}
	// show names the broken node and fails.
	_, stderr, code = f.run("show", f.p2)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "/jobs/"+f.p2+"/status", "bad JSON")
}

func TestShowJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("show", f.failed)
	wantCode(t, code, 0)
	for _, want := range []string{
		"jid: +" + f.failed + "\n",
		"batch: +" + f.b1 + "\n",
		"status: +Failed\n",
		"last_successful_status: +Estimating\n",
		"retry_count: +0\n",
		"message: +download timed out\n",
		"priority: +5\n",
		"space_needed: +1234\n",
		// Objects as one readable line per member, not JSON.
		`configuration.payload_url: +https://example.org/obj.zip` + "\n",
		`configuration.profile_name: +demo` + "\n",
		`identifiers.primary_id: +ark:/99999/fk4test` + "\n",
		`identifiers.local_id: +loc-1` + "\n",
		`metadata.erc_who: +Doe, Jane` + "\n",
		"store: +-\n",
		"inventory: +-\n",
		"locked: +no\n",
	} {
		if !regexp.MustCompile("(?m)^" + want).MatchString(out) {
			t.Errorf("show lacks a line like %q", want)
		}
	}
	// Values start in one column.
	col := -1
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		i := strings.Index(l, ": ") + 2
		for i < len(l) && l[i] == ' ' {
			i++
		}
		if col >= 0 && i != col {
			t.Errorf("line %q: value at column %d, want %d", l, i, col)
		}
		col = i
	}

	out, _, code = f.run("show", f.p1, "-o", "json")
	wantCode(t, code, 0)
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j["jid"] != f.p1 || j["status"] != "Pending" || j["last_successful_status"] != nil || j["locked"] != false ||
		j["priority"] != 5.0 || j["configuration"].(map[string]any)["profile_name"] != "demo" {
		t.Errorf("show -o json: %v", j)
	}

	_, stderr, code := f.run("show", "jid0000099999")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "jid0000099999", "no such job")
}

// show tells a job or batch the queue removed (delete --purge) from one
// it never made (a mistyped id), and where a removed one's history is.
func TestShowSaysRemovedOrNeverMade(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, _, code := f.run("delete", "--purge", f.failed)
	wantCode(t, code, 0)
	_, _, code = f.run("hold", "batch", f.b2)
	wantCode(t, code, 0)
	_, _, code = f.run("delete", f.b2)
	wantCode(t, code, 0)
	for _, c := range []struct{ id, flag string }{{f.failed, "--job"}, {f.b2, "--batch"}} {
		_, stderr, code := f.run("show", c.id)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, c.id+" was removed from the queue", "ingestq events replay "+c.flag+" "+c.id)
	}
	for _, id := range []string{"jid0000099999", "bid0000099999"} {
		_, stderr, code := f.run("show", id)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, id, "this queue has not made it")
	}
}

func TestShowBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("show", f.b1)
	wantCode(t, code, 0)
	for _, want := range []string{
		"bid: +" + f.b1,
		"uuid: +uuid-b1",
		"status: +Pending",
		"profile: +demo",
		"report: +-",
		"batch-processing: +" + f.p1 + " " + f.p2,
		"batch-failed: +" + f.failed,
		"batch-completed: +-",
	} {
		if !regexp.MustCompile("(?m)^" + want + "$").MatchString(out) {
			t.Errorf("show lacks a line like %q", want)
		}
	}
	// By uuid, as JSON.
	out, _, code = f.run("show", "uuid-b2", "-o", "json")
	wantCode(t, code, 0)
	var b struct {
		BID        string         `json:"bid"`
		Status     string         `json:"status"`
		Submission map[string]any `json:"submission"`
		Processing []string       `json:"batch-processing"`
		Failed     []string       `json:"batch-failed"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if b.BID != f.b2 || b.Status != "Pending" || b.Submission["submitter"] != "tester" ||
		!slices.Equal(b.Processing, []string{f.o1}) || b.Failed == nil || len(b.Failed) != 0 {
		t.Errorf("show uuid-b2 -o json: %+v", b)
	}
	_, stderr, code := f.run("show", "no-such-uuid")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "no-such-uuid", "not found")
}

func TestCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, code := f.run("check")
	wantCode(t, code, 0)
	if out != "ok: 4 jobs, 2 batches checked\n" {
		t.Errorf("check: %q", out)
	}
	out, _, code = f.run("check", "-o", "json")
	wantCode(t, code, 0)
	if strings.Join(strings.Fields(out), "") != `{"violations":[],"warnings":[]}` {
		t.Errorf("check -o json: %q", out)
	}

	dangling := "/jobs/states/pending/05-jid0000009999"
	_, err := f.conn.Create(f.root+dangling, nil, 0, zk.WorldACL(zk.PermAll))
	f.ok(err)
	out, _, code = f.run("check")
	wantCode(t, code, 1)
	if want := dangling + ": ref without a job\n1 violation\n"; out != want {
		t.Errorf("check: %q, want %q", out, want)
	}
	out, _, code = f.run("check", "-o", "json")
	wantCode(t, code, 1)
	var v struct {
		Violations []struct{ Path, Problem string } `json:"violations"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Violations) != 1 || v.Violations[0].Path != dangling || v.Violations[0].Problem != "ref without a job" {
		t.Errorf("check -o json: %+v", v)
	}
}

// An argument of the wrong kind is named as such, not looked up as a batch
// uuid and "not found": a job id where a batch is wanted, a local id given
// to show, a bad access request id.
func TestWrongKindOfID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.batch("uuid-kinds", "demo")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"report", "jid0000000005"}, []string{"jid0000000005 is a job id", "bid…", "uuid"}},
		{[]string{"cancel", "jid0000000005"}, []string{"jid0000000005 is a job id"}},
		{[]string{"show", "demo-poems"}, []string{`batch uuid "demo-poems": not found`, "ls jobs --local-id demo-poems"}},
		{[]string{"access", "show", "bogus"}, []string{"is not an access request id"}},
	} {
		_, stderr, code := e.run(c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", c.args)
			continue
		}
		wantErrLine(t, stderr, c.want...)
	}
}
