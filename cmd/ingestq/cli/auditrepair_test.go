package cli_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// ingestq audit --repair against a real daemon whose PostgreSQL inventory
// was restored from a pg_dump taken before the demo was deposited: refused
// while the ingest queue runs, it then records the demo's three objects
// from storage (a "repaired:" line each), the audit after it is clean, and
// ingestq object shows a repaired object's files and local id.
func TestAuditRepairAgainstADaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pg := pgtest.Start(t)
	invURL := pgtest.NewDatabase(t, pg)
	const admin = "admin-token-0123456789abcdef"
	nats := closedAddr(t)
	d := serveEnv(t, map[string]string{"INGESTQ_ADMIN_TOKEN": admin}, zktest.Shared(t).Addr, e.root,
		"--inventory", invURL, "--nats-listen", nats)
	dump, err := pg.Dump(invURL) // the daemon has made its tables: a dump of an empty inventory
	e.ok(err)
	_, _, code := e.run("--nats", "nats://"+nats, "--nats-token", admin, "submit", "--profile", "demo", "--wait", demoWeb(t).URL+"/batch.checkm")
	wantCode(t, code, 1) // the sample's wrong digest fails one job, so the batch

	arks := map[string]string{} // local id → ARK
	for _, jid := range e.onlyBatch().Report.SuccessfulJobs {
		j, err := e.q.LoadJob(t.Context(), jid)
		e.ok(err)
		arks[j.Identifiers.LocalIDs[0]] = j.Identifiers.PrimaryID
	}
	if len(arks) != 3 {
		t.Fatalf("stored %v, want the demo's three objects", arks)
	}
	e.ok(pg.Restore(invURL, dump))
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runEnv(t, map[string]string{"INGESTQ_API_TOKEN": admin},
			append([]string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root}, append(args, "--api", d.url+"/api/v1")...)...)
	}

	out, _, code := run("audit")
	wantCode(t, code, 1)
	if n := strings.Count(out, "object-unrecorded: "); n != 3 {
		t.Fatalf("the audit of the restored inventory: %d object-unrecorded lines, want 3:\n%s", n, out)
	}

	// Refused while the queue runs: a 409 naming the hold.
	_, stderr, code := run("audit", "--repair")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "409", "the ingest queue is not held", "ingestq hold queue")
	if strings.Contains(stderr, "decision") {
		t.Errorf("the refusal names a decision, which its reader cannot look up: %q", stderr)
	}

	_, _, code = e.run("hold", "queue")
	wantCode(t, code, 0)
	out, stderr, code = run("audit", "--repair")
	wantCode(t, code, 0)
	repaired := regexp.MustCompile(`(?m)^repaired: version 1 of (\S+) \(profile "demo"\) recorded in the inventory from primary target \S+: \d+ files, local ids \["([^"]+)"\], from job "jid\d+" of batch "bid\d+", created \S+; copies at \S+$`).FindAllStringSubmatch(out, -1)
	var got []string
	for _, m := range repaired {
		got = append(got, m[2])
		if arks[m[2]] != m[1] {
			t.Errorf("repaired %s with local id %s, which is %s's", m[1], m[2], arks[m[2]])
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"demo-letters", "demo-maps", "demo-poems"}) || stderr != "" ||
		!regexp.MustCompile(`(?m)^audited 3 objects, 3 versions, \d+ files; 0 B read; 0 findings; 3 versions repaired; \S+$`).MatchString(out) {
		t.Errorf("audit --repair: repaired %v (stderr %q), want a line each of the demo's objects and the summary's count:\n%s", got, stderr, out)
	}

	out, _, code = run("audit", "--fixity")
	wantCode(t, code, 0)
	if !strings.Contains(out, "audited 3 objects, 3 versions, ") || !strings.Contains(out, "; 0 findings; ") {
		t.Errorf("the audit after the repair: want the 3 objects and no finding:\n%s", out)
	}

	poems := arks["demo-poems"]
	out, _, code = run("object", poems)
	wantCode(t, code, 0)
	for _, want := range []string{"  local ids: demo-poems\n", "  what: Ozymandias  who: Shelley, Percy Bysshe  when: 1818\n",
		"system/mrt-erc.txt", "  copies (1):\n", "ingestion", "recorded from storage by ingestq audit --repair"} {
		if !strings.Contains(out, want) {
			t.Errorf("object %s: want %q in:\n%s", poems, want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^version 1  created \S+ \S+  from batch bid\d+, job jid\d+$`).MatchString(out) {
		t.Errorf("object %s: want version 1 from its batch and job:\n%s", poems, out)
	}
}
