package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The README's by-hand path: `ingestq serve` with its defaults (the ingest
// pipeline, the built-in demo profile, an embedded NATS), testdata/demo
// served by a plain file server, and `ingestq submit --wait` of its batch
// manifest. Three objects are stored with their ARKs and local ids, and the
// fourth fails on its wrong digest. One setting more than the README's:
// --max-fill 1, so that the test passes on a disk past 80 % (as CI's was),
// where the README's reader sees the jobs wait and `ingestq show` says why.
func TestByHandPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nats := closedAddr(t)
	daemonLog := logtest.NewT(t)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan int, 1)
	data := t.TempDir()
	go func() {
		served <- cli.Run(ctx, []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve",
			"--data-dir", data, "--nats-listen", nats, "--http", "127.0.0.1:0", "--fetch-allow", "127.0.0.0/8", "--max-fill", "1"},
			daemonLog, daemonLog, func(string) string { return "" })
	}()
	stopDaemon := sync.OnceValue(func() int { stop(); return <-served })
	t.Cleanup(func() {
		if code := stopDaemon(); code != 0 {
			t.Errorf("serve exited %d", code)
		}
	})
	web := demoWeb(t)

	// The daemon is ready once it has published its profiles (its NATS
	// listens before that).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, known, err := profile.Known(t.Context(), e.q, "demo")
		if known {
			break
		}
		select {
		case code := <-served:
			t.Fatalf("serve exited %d before it was ready", code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon published no profile within 30 s (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	out, stderr, code := e.run("--nats", "nats://"+nats, "submit", "--profile", "demo", "--wait", web.URL+"/batch.checkm")
	wantCode(t, code, 1) // the sample's wrong digest fails one job, so the batch
	bid := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{
		"successful jobs: 3",
		"failed jobs: +1",
		`jid\d{10}  \(no ARK\)  local id demo-photos  Downloading: .*md5 mismatch: want 0{32}, got [0-9a-f]{32}`,
	} {
		if !regexp.MustCompile(`(?m)^ *` + want + `$`).MatchString(out) {
			t.Errorf("the report lacks a line like %q", want)
		}
	}
	if !strings.Contains(stderr, "4/4 jobs finished (3 completed, 1 failed)") || !strings.Contains(stderr, "batch "+bid+" Failed: 1 of 4 jobs failed") {
		t.Errorf("stderr does not end with the whole batch done and why it failed:\n%s", stderr)
	}
	if strings.Contains(out+stderr, "no such host") {
		t.Errorf("a manifest still names a placeholder host")
	}

	// Each stored object has its ARK and the depositor's local id, and show
	// finds its job by the ARK.
	b, err := e.q.LoadBatch(ctx, bid)
	e.ok(err)
	stored := map[string]string{} // local id → ARK
	for _, jid := range b.Report.SuccessfulJobs {
		j, err := e.q.LoadJob(ctx, jid)
		e.ok(err)
		if ids := j.Identifiers; ids != nil && mint.Valid(ids.PrimaryID) && len(ids.LocalIDs) == 1 {
			stored[ids.LocalIDs[0]] = ids.PrimaryID
		}
	}
	if len(stored) != 3 || stored["demo-poems"] == "" || stored["demo-letters"] == "" || stored["demo-maps"] == "" {
		t.Fatalf("stored objects %v, want demo-poems, demo-letters and demo-maps, each with a minted ARK", stored)
	}
	out, _, code = e.run("show", stored["demo-poems"])
	wantCode(t, code, 0)
	if !strings.Contains(out, "demo-poems") || !strings.Contains(out, "Ozymandias") {
		t.Errorf("show %s does not show the job of demo-poems:\n%s", stored["demo-poems"], out)
	}

	// The stored object, from the inventory: while the daemon holds the
	// embedded inventory its API is asked, and one that does not answer is
	// named; once the daemon stops, the object is shown with its copy and
	// PREMIS events.
	ark := stored["demo-poems"]
	_, stderr, code = e.run("object", ark, "--data-dir", data, "--api", "http://"+closedAddr(t)+"/api/v1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "inventory", "in use by a running daemon, and the daemon's API does not answer", "--inventory URL")
	if code := stopDaemon(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	out, _, code = e.run("object", ark, "--data-dir", data)
	wantCode(t, code, 0)
	for _, want := range []string{ark, "version 1", "producer/ozymandias.txt", "system/mrt-premis.xml", "copies (1)",
		"identifier assignment", "message digest calculation", "fixity check", "replication", "ingestion"} {
		if !strings.Contains(out, want) {
			t.Errorf("object %s does not show %q:\n%s", ark, want, out)
		}
	}
	out, _, code = e.run("object", "--profile", "demo", "demo-poems", "--data-dir", data, "-o", "json")
	wantCode(t, code, 0)
	var d struct {
		Object   struct{ ARK string } `json:"object"`
		Versions []struct {
			Events []struct{ Type string } `json:"events"`
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Object.ARK != ark || len(d.Versions) != 1 || len(d.Versions[0].Events) < 5 {
		t.Errorf("object --profile demo demo-poems -o json: %v %+v\n%s", err, d, out)
	}
	_, stderr, code = e.run("object", "demo-poems", "--data-dir", data)
	wantCode(t, code, 2)
	wantErrLine(t, stderr, "demo-poems", "--profile")
}

// demoContent is testdata/demo: the demo's batch.checkm and its payloads.
var demoContent = filepath.Join("..", "..", "..", "testdata", "demo")

// demoWeb serves demoContent over HTTP until the test ends.
func demoWeb(t *testing.T) *httptest.Server {
	web := httptest.NewServer(http.FileServer(http.Dir(demoContent)))
	t.Cleanup(web.Close)
	return web
}
