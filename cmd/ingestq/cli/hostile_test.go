package cli_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
)

// hostileName is a file name a foreign writer may put in a job: U+202E
// shows "report\u202efdp.exe" as "reportexe.pdf", ESC[2J clears the
// operator's terminal and \r overwrites the line.
const hostileName = "report\u202efdp.exe\x1b[2J\rok"

// hostileJob makes a job as a program writing straight to ZooKeeper can
// (ingestq's submit refuses such names): its file name, title, local id,
// a key of its configuration and its message hold controls.
func (e *env) hostileJob() (bid, jid string) {
	e.t.Helper()
	bid = e.batch("uuid-hostile", "demo")
	b, err := e.q.LoadBatch(e.t.Context(), bid)
	e.ok(err)
	cfg := queue.JobConfig{Profile: "demo", PayloadURL: "https://example.org/obj.zip", FileName: hostileName}
	cfg.Extra.Set("note\x1b]8;;https://evil.example\x1b\\", "x")
	j, err := e.q.CreateJob(e.t.Context(), b, queue.JobSpec{Priority: 5, SpaceNeeded: 1,
		Config:      cfg,
		Identifiers: &queue.Identifiers{PrimaryID: "ark:/99999/fk4hostile", LocalIDs: []string{"loc\u202e1"}},
		Metadata:    &queue.Metadata{What: "title\u2066x\u2069\u009b2J"}})
	e.ok(err)
	e.moveJob(j.ID, "fetch failed\x1b[31m red", queue.Held)
	return bid, j.ID
}

// What the queue holds reaches the operator's terminal with its control
// and bidirectional characters written as escapes, in show's and ls's
// text; -o json escapes them too and reads back as stored.
func TestTextShowsControlsAsEscapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bid, jid := e.hostileJob()
	raw := func(what, out string) {
		t.Helper()
		if i := strings.IndexAny(out, "\x1b\r\u202e\u2066\u2069\u009b"); i >= 0 {
			t.Errorf("%s writes a control character raw (at %d):\n%q", what, i, out)
		}
	}
	line := func(key, value string) string { // a line of show's, its value aligned
		return `^` + regexp.QuoteMeta(key) + `: +` + regexp.QuoteMeta(value) + `$`
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"show", jid}, []string{
			line("configuration.file_name", `report\u202efdp.exe\u001b[2J\rok`),
			line(`configuration.note\u001b]8;;https://evil.example\u001b\`, "x"),
			line("identifiers.local_id", `loc\u202e1`),
			line("metadata.erc_what", `title\u2066x\u2069\u009b2J`),
			line("message", `fetch failed\u001b[31m red`)}},
		{[]string{"show", bid}, []string{`  loc\\u202e1  held: .*; fetch failed\\u001b\[31m red$`}},
		{[]string{"ls", "jobs"}, []string{`; fetch failed\\u001b\[31m red  .*  loc\\u202e1  title\\u2066x\\u2069\\u009b2J$`}},
	} {
		out, _, code := e.run(c.args...)
		wantCode(t, code, 0)
		what := strings.Join(c.args, " ")
		raw(what, out)
		for _, w := range c.want {
			if !regexp.MustCompile("(?m)" + w).MatchString(out) {
				t.Errorf("%s has no line like %s:\n%s", what, w, out)
			}
		}
	}

	out, _, code := e.run("show", jid, "-o", "json")
	wantCode(t, code, 0)
	raw("show -o json", out)
	var j struct {
		Configuration map[string]any `json:"configuration"`
		Metadata      map[string]any `json:"metadata"`
	}
	e.ok(json.Unmarshal([]byte(out), &j))
	if j.Configuration["file_name"] != hostileName || j.Metadata["erc_what"] != "title\u2066x\u2069\u009b2J" ||
		!strings.Contains(out, `report\u202efdp.exe\u001b[2J\rok`) {
		t.Errorf("show -o json: file_name %q, erc_what %q; want them as stored, written as escapes:\n%s",
			j.Configuration["file_name"], j.Metadata["erc_what"], out)
	}
}

// An error that quotes what the queue holds (here the names of the
// profiles published, one by a foreign writer) reaches stderr with its
// bidirectional and invisible characters as escapes, as stdout shows them.
func TestErrorsShowControlsAsEscapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDemo()
	_, err := e.conn.Create(e.q.Path("/ingestq/profiles/demo\u202ecod.exe\u200b"), []byte("{}"), 0, zk.WorldACL(zk.PermAll))
	e.ok(err)
	_, stderr, code := e.run("hold", "collection", "typo")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, `no profile "typo" is published on this queue (published: demo, demo\u202ecod.exe\u200b)`)
	if i := strings.IndexAny(stderr, "\u202e\u200b"); i >= 0 {
		t.Errorf("the error writes a bidirectional or invisible character raw (at %d): %q", i, stderr)
	}
}

// A note on stderr that names what the queue holds (here a collection a
// foreign writer named, held, with a Pending batch) shows its bidirectional
// and invisible characters as escapes, as stdout does (ZooKeeper refuses
// control characters in a node's name).
func TestNotesShowControlsAsEscapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const profile = "demo\u202ecod.exe\u200b"
	e.batch("uuid-hostile", profile)
	_, err := e.q.HoldCollection(t.Context(), profile)
	e.ok(err)
	_, stderr, code := e.run("ls", "batches")
	wantCode(t, code, 0)
	if want := `note: collection demo\u202ecod.exe\u200b is held since `; !strings.Contains(stderr, want) {
		t.Errorf("ls batches' stderr %q: want a note %q", stderr, want)
	}
	if i := strings.IndexAny(stderr, "\u202e\u200b"); i >= 0 {
		t.Errorf("the note writes a bidirectional or invisible character raw (at %d): %q", i, stderr)
	}
}
