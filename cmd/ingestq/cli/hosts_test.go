package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// `ingestq hosts` prints what each host's long steps wait on, which its
// node holds (waits): the job, the back end and since when, a line each,
// below the table; a host with none adds no line. A download says whether
// its bytes move, or since when none came.
func TestHostsSayWhatLongStepsWaitOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	node, err := json.Marshal(reactor.HostInfo{Name: "host1", PID: 1, Waits: map[string]reactor.WaitingOn{
		"jid0000000002": {What: "the inventory", Since: since.Add(time.Minute)},
		"jid0000000001": {What: "storage target s3://b/ocfl", Since: since},
		"jid0000000003": {What: "the depositor's server example.org", Since: since, Moving: true},
		"jid0000000004": {What: "the depositor's server example.net", Since: since, NoByteSince: since.Add(time.Hour)},
	}})
	e.ok(err)
	e.ok(e.q.RegisterHost(t.Context(), "host1", node))
	e.ok(e.q.RegisterHost(t.Context(), "host2", []byte(`{"name":"host2","pid":2}`)))
	out, stderr, code := e.run("hosts")
	wantCode(t, code, 0)
	want := []string{
		"host1: jid0000000001 waits on storage target s3://b/ocfl since " + queue.TextTime(since),
		"host1: jid0000000002 waits on the inventory since " + queue.TextTime(since.Add(time.Minute)),
		"host1: jid0000000003 moves bytes with the depositor's server example.org (since " + queue.TextTime(since) + ")",
		"host1: jid0000000004 waits on the depositor's server example.net since " + queue.TextTime(since) +
			", no byte since " + queue.TextTime(since.Add(time.Hour)),
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3+len(want) || strings.Join(lines[3:], "\n") != strings.Join(want, "\n") {
		t.Errorf("ingestq hosts printed\n%s\n(stderr %q); want the table of 2 hosts, then\n%s", out, stderr, strings.Join(want, "\n"))
	}
}
