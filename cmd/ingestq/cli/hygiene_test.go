package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon restarted with --profiles DIR no longer serves the built-in demo
// profile, though it stays published: submit refuses it, naming what the
// live daemons serve, before any batch exists, and takes the profile they
// serve. With no daemon running, the published profiles decide (a batch
// waits for a daemon).
func TestSubmitRefusesAProfileNoLiveDaemonServes(t *testing.T) {
	t.Parallel()
	zk, root := zktest.Shared(t).Addr, zktest.Root(t)
	first := serve(t, zk, root, "--host", "vm") // the built-in demo profile
	wantCode(t, first.stop(), 0)
	// No daemon runs: the published demo is taken (a batch waits for one).
	_, _, code := run(t, root, "submit", "--profile", "demo", "https://example.org/waits.checkm")
	wantCode(t, code, 0)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "local.yml"), []byte("name: local\nnaan: \"99999\"\nshoulder: fk4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve(t, zk, root, "--host", "vm", "--profiles", dir)
	_, stderr, code := run(t, root, "submit", "--profile", "demo", "https://example.org/m.checkm")
	wantCode(t, code, 2)
	wantErrLine(t, stderr, `profile "demo"`, "no live daemon of this queue serves it", "vm serves local", "--profiles")
	_, _, code = run(t, root, "submit", "--profile", "local", "https://example.org/m.checkm")
	wantCode(t, code, 0)
	q, err := queue.New(zktest.Connect(t), root)
	if err != nil {
		t.Fatal(err)
	}
	if batches, _, err := q.ListBatches(t.Context()); err != nil || len(batches) != 2 {
		t.Errorf("%d batches (%v), want the two accepted", len(batches), err)
	}
}

// hosts forget refuses a name no daemon of this queue ever ran as (a typo
// stayed listed as forgotten, with no undo), naming those that did; it
// forgets a host that ran, and, with --force, any name.
func TestForgetRefusesAHostThatNeverRan(t *testing.T) {
	t.Parallel()
	root := zktest.Root(t)
	wantCode(t, serve(t, zktest.Shared(t).Addr, root, "--host", "vm").stop(), 0)
	_, stderr, code := run(t, root, "hosts", "forget", "vn")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, `host "vn"`, "known: vm", "--force")
	out, _, code := run(t, root, "hosts")
	wantCode(t, code, 0)
	if strings.Contains(out, "vn") {
		t.Errorf("hosts after a refused forget:\n%s", out)
	}
	// A daemon of the release before the record runs (a rolling upgrade):
	// its host node is there, its name is not recorded. It is refused as
	// running, not as a name that never ran.
	if _, err := zktest.Connect(t).Create(root+"/ingestq/hosts/older", []byte(`{"version":"older"}`), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run(t, root, "hosts", "forget", "older")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "host older is running", "stop its daemon first")
	out, _, code = run(t, root, "hosts", "forget", "vm")
	wantCode(t, code, 0)
	if !strings.Contains(out, "forgot host vm") {
		t.Errorf("hosts forget vm: %q", out)
	}
	_, _, code = run(t, root, "hosts", "forget", "vm") // again: it is forgotten, so known
	wantCode(t, code, 0)
	_, _, code = run(t, root, "hosts", "forget", "--force", "before-upgrade")
	wantCode(t, code, 0)
	out, _, code = run(t, root, "hosts")
	wantCode(t, code, 0)
	if !strings.Contains(out, "forgotten: before-upgrade") || !strings.Contains(out, "forgotten: vm") {
		t.Errorf("hosts:\n%s\nwant vm and before-upgrade forgotten", out)
	}
}

// A batch or job the queue never made is said to be so once: the message
// does not end in a second "not found".
func TestShowNeverMadeSaysSoOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wantShowRefuses(t, e, map[string]string{
		"bid9": "ingestq: batch bid9: no such batch (this queue has not made it)\n",
		"jid9": "ingestq: job jid9: no such job (this queue has not made it)\n",
	})
}

// wantShowRefuses runs show with each id, which exits 1 with its stderr.
func wantShowRefuses(t *testing.T, e *env, stderrs map[string]string) {
	t.Helper()
	for id, want := range stderrs {
		_, stderr, code := e.run("show", id)
		wantCode(t, code, 1)
		if stderr != want {
			t.Errorf("show %s: stderr %q, want %q", id, stderr, want)
		}
	}
}

// An id not written as ZooKeeper writes a sequence number (jid7, bid1) is
// never made, though its number is below what the queue gave out: it was
// said to be removed, with a replay command that found nothing (exit 0).
// jid0000000007 and bid0000000003, removed (here by another program, as
// Merritt's sweep removes Completed batches and their jobs), are still
// said to be removed, by whom they may have been; a uuid naming
// bid0000000003 says so (it was "not found"), and so does one written as
// Merritt writes its uuids, "bid-" and a UUID (it was "batch bid-…: no
// such batch (this queue has not made it)": taken for a bid).
func TestShowAnUnpaddedIdIsNeverMade(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, folder := range []string{"/batches/bid", "/jobs/jid"} {
		for range 10 {
			_, err := e.conn.Create(e.root+folder, nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
			e.ok(err)
		}
	}
	e.ok(e.conn.Delete(e.root+"/jobs/jid0000000007", -1))
	e.ok(e.conn.Delete(e.root+"/batches/bid0000000003", -1))
	// A uuid left naming a batch that is gone: mrt-zk writes it right after
	// the bid node, and cleanup removes a bid node a creation left empty.
	const merritts = "bid-2b1e7c0a-4f3d-4c61-9a0e-5d7b8c9e1f20"
	for _, uuid := range []string{"uuid-left", merritts} {
		_, err := e.conn.Create(e.root+"/batch-uuids/"+uuid, []byte("bid0000000003"), 0, zk.WorldACL(zk.PermAll))
		e.ok(err)
	}
	wantShowRefuses(t, e, map[string]string{
		"bid0000000003": "ingestq: batch bid0000000003 was removed from the queue (by ingestq delete or cleanup, or by another program such as " +
			"Merritt's delete_completed_batches); its history: ingestq events replay --batch bid0000000003\n",
		"uuid-left": "ingestq: batch uuid uuid-left names bid0000000003, which is gone (a creation cut short, or a batch removed without its uuid)\n",
		merritts:    "ingestq: batch uuid " + merritts + " names bid0000000003, which is gone (a creation cut short, or a batch removed without its uuid)\n",
		"jid7":      "ingestq: job jid7: no such job (this queue has not made it)\n",
		"jid07":     "ingestq: job jid07: no such job (this queue has not made it)\n",
		"bid1":      "ingestq: batch bid1: no such batch (this queue has not made it)\n",
		"jid0000000007": "ingestq: job jid0000000007 was removed from the queue (by ingestq delete or cleanup, or by another program such as " +
			"Merritt's delete_completed_batches); its history: ingestq events replay --job jid0000000007\n",
	})
}

// A queue made anew within a minute (a wiped ZooKeeper, the same root and
// data folder): events replay leaves out the old queue's last events,
// which the minute of clock skew a replay allows let through.
func TestReplayLeavesOutTheOldQueueOfADataFolder(t *testing.T) {
	t.Parallel()
	data, nats := t.TempDir(), closedAddr(t)
	cli := func(zk string, args ...string) (string, string, int) {
		return runEnv(t, nil, append([]string{"--zk", zk, "--nats", "nats://" + nats}, args...)...)
	}
	old := zktest.OwnServer(t)
	d := serve(t, old.Addr, "", "--data-dir", data, "--nats-listen", nats)
	_, _, code := cli(old.Addr, "hold", "queue")
	wantCode(t, code, 0)
	out, _, code := cli(old.Addr, "events", "replay")
	wantCode(t, code, 0)
	if !strings.Contains(out, "hold") {
		t.Fatalf("the old queue's replay lacks its hold:\n%s", out)
	}
	wantCode(t, d.stop(), 0)

	anew := zktest.OwnServer(t)
	serve(t, anew.Addr, "", "--data-dir", data, "--nats-listen", nats)
	_, _, code = cli(anew.Addr, "release", "queue")
	wantCode(t, code, 0)
	for _, args := range [][]string{{"events", "replay"}, {"events", "replay", "--since", "10m"}} {
		out, _, code = cli(anew.Addr, args...)
		wantCode(t, code, 0)
		if strings.Contains(out, "hold") || !strings.Contains(out, "release") {
			t.Errorf("%s on the new queue:\n%s\nwant its release only", strings.Join(args, " "), out)
		}
	}
}
