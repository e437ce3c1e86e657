package cli_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The access commands against a real daemon: a file deposited, then its
// package asked for with --wait (the daemon holds the embedded inventory,
// so the estimate comes from its API), fetched from the URL printed, and
// the request listed, shown, replayed from the event stream and deleted;
// an unknown ARK is refused naming it; a held access queue leaves a
// request Pending.
func TestAccessCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	data, nats := t.TempDir(), closedAddr(t)
	d := serve(t, zktest.Shared(t).Addr, e.root, "--data-dir", data, "--nats-listen", nats)
	content := []byte("When in the course of human events\n")
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "declaration.txt", time.Time{}, bytes.NewReader(content))
	}))
	t.Cleanup(web.Close)
	_, _, code := e.run("--nats", "nats://"+nats, "submit", "--profile", "demo", "--wait", web.URL+"/declaration.txt")
	wantCode(t, code, 0)
	ark := onlyARK(e)
	access := func(args ...string) (string, string, int) {
		return e.run(append([]string{"--nats", "nats://" + nats, "access"}, args...)...)
	}

	out, stderr, code := access("request", ark, "--file", "producer/declaration.txt", "--wait", "--data-dir", data, "--api", d.url+"/api/v1")
	wantCode(t, code, 0)
	ref := regexp.MustCompile(`(?m)^ref: +(small/qid\d{10})$`).FindStringSubmatch(out)
	url := regexp.MustCompile(`(?m)^url: +(http://\S+/access/\S+\.zip)$`).FindStringSubmatch(out)
	if ref == nil || url == nil || !strings.Contains(out, "status:") || !strings.Contains(stderr, "Completed") {
		t.Fatalf("request --wait printed no ref, url or Completed:\n%s%s", out, stderr)
	}
	entries := fetchZip(t, url[1])
	if len(entries) != 1 || entries[strings.NewReplacer(":/", "_", "/", "_").Replace(ark)+"/producer/declaration.txt"] != sha256hex(content) {
		t.Errorf("package entries %v, want the deposited file's sha256 %s", entries, sha256hex(content))
	}

	out, _, code = access("ls")
	wantCode(t, code, 0)
	if !regexp.MustCompile(ref[1] + `\s+Completed\s+` + regexp.QuoteMeta(ark) + `\s+1 file of the latest\s+zip`).MatchString(out) {
		t.Errorf("ls does not list %s Completed:\n%s", ref[1], out)
	}
	out, _, code = access("show", ref[1], "-o", "json")
	wantCode(t, code, 0)
	var v ops.AccessView
	e.ok(json.Unmarshal([]byte(out), &v))
	if v.State != queue.Completed || v.Token.Package == nil || v.Token.URL != url[1] || v.Token.ContentBytes != int64(len(content)) {
		t.Errorf("show -o json: %+v", v)
	}
	out, _, code = e.run("--nats", "nats://"+nats, "events", "replay", "--access", ref[1])
	wantCode(t, code, 0)
	for _, want := range []string{"access " + ref[1] + "  → Pending", "access " + ref[1] + "  Pending → Processing", "access " + ref[1] + "  Processing → Completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("events replay --access lacks %q:\n%s", want, out)
		}
	}

	_, stderr, code = access("request", "ark:/99999/fk4nope", "--data-dir", data, "--api", d.url+"/api/v1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "object ark:/99999/fk4nope is not in the inventory")

	// ingestq object, while the daemon holds the embedded inventory, asks its API.
	out, _, code = e.run("object", ark, "--data-dir", data, "--api", d.url+"/api/v1")
	wantCode(t, code, 0)
	if !strings.Contains(out, ark) || !strings.Contains(out, "producer/declaration.txt") {
		t.Errorf("object %s through the API:\n%s", ark, out)
	}
	_, stderr, code = e.run("object", "--profile", "demo", "no-such-id", "--data-dir", data, "--api", d.url+"/api/v1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, `no object no-such-id in the inventory served by the daemon's API at `+d.url+`/api/v1`)

	// On a host without the daemon's data folder, the API answers; with no
	// API either, the error says both.
	elsewhere := t.TempDir()
	out, _, code = access("request", ark, "--data-dir", elsewhere, "--api", d.url+"/api/v1")
	wantCode(t, code, 0)
	if !regexp.MustCompile(`^small/qid\d{10}$`).MatchString(strings.TrimSpace(out)) {
		t.Errorf("request from a host without the inventory: %q, want its ref", out)
	}
	_, stderr, code = access("request", ark, "--data-dir", elsewhere, "--api", "http://"+closedAddr(t)+"/api/v1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "there is no embedded inventory at "+filepath.Join(elsewhere, "inventory.db")+", and the daemon's API does not answer")

	out, _, code = e.run("hold", "queue", "access-small")
	wantCode(t, code, 0)
	if !strings.HasPrefix(out, "queue accessSmall held: no new small access request is taken") {
		t.Errorf("hold queue access-small: %q", out)
	}
	out, _, code = access("request", ark, "--version", "1", "--format", "tar.gz", "--data-dir", data, "--api", d.url+"/api/v1")
	wantCode(t, code, 0)
	held := strings.TrimSpace(out)
	out, _, code = access("show", held, "-o", "json")
	wantCode(t, code, 0)
	e.ok(json.Unmarshal([]byte(out), &v))
	if v.State != queue.Pending || v.Queue != queue.AccessSmall || v.Token.Format != queue.FormatTarGz {
		t.Errorf("request on a held queue: %+v", v)
	}
	_, stderr, code = access("requeue", held)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "access request "+held+" is Pending; only a Failed request can be requeued")
	out, _, code = runEnv(t, map[string]string{"USER": "alice"}, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root,
		"--nats", "nats://"+nats, "access", "delete", ref[1])
	wantCode(t, code, 0)
	if !strings.Contains(out, "access request "+ref[1]+" removed") {
		t.Errorf("delete: %q", out)
	}

	// Removed, it is gone, as the API says: by whom and when, by its ref or
	// its qid, to show, requeue or delete; what was never made is not found.
	// Its time is local, as every time in text.
	stamp := `at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d; ` + regexp.QuoteMeta("`ingestq access request "+ark+"` asks again")
	qid := strings.TrimPrefix(ref[1], "small/")
	for _, args := range [][]string{{"show", ref[1]}, {"show", qid}, {"requeue", ref[1]}, {"delete", qid}} {
		_, stderr, code = access(args...)
		wantCode(t, code, 1)
		wantErrLine(t, stderr)
		if !regexp.MustCompile(regexp.QuoteMeta("access request "+args[1]+" was deleted by alice ") + stamp).MatchString(stderr) {
			t.Errorf("access %s of a removed request: %q, want it gone, deleted by alice, at a time, and how to ask again", strings.Join(args, " "), stderr)
		}
	}
	_, stderr, code = access("show", "small/qid0000009999")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "access request small/qid0000009999: no such access request (this queue has not made it)")
}

// onlyARK is the ARK of the one job of the queue's one batch.
func onlyARK(e *env) string {
	e.t.Helper()
	b := e.onlyBatch()
	if b.Report == nil || len(b.Report.SuccessfulJobs) != 1 {
		e.t.Fatalf("batch %s: report %+v", b.ID, b.Report)
	}
	j, err := e.q.LoadJob(e.t.Context(), b.Report.SuccessfulJobs[0])
	e.ok(err)
	return j.Identifiers.PrimaryID
}

// fetchZip GETs a zip package and returns its entries' sha256 by name.
func fetchZip(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A request Merritt's own access service made (mrt-zk's Access.createAssembly
// with its token: no ARK or format of ingestq's) is listed as what it is: it
// asks ingestq for nothing, so its WHAT is "-", not "every version" (as
// `access ls` said of it in the walk-through against mrt-zk f113b84).
func TestAccessListsAForeignRequestAsAskingNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := `{"token":"merritt-own-0002","cloud-content-byte":100,"delivery-node":7001,"status":"NotReady","anticipated-availability-time":"2026-11-27 03:10:00 +0000"}`
	status := `{"status":"Pending","last_modified":"2026-11-27 02:56:41 +0000","message":""}`
	p := e.root + "/access/small/qid0000000000"
	for _, n := range [][2]string{{p, ""}, {p + "/token", token}, {p + "/status", status}} {
		if _, err := e.conn.Create(n[0], []byte(n[1]), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := e.run("access", "ls")
	wantCode(t, code, 0)
	if !regexp.MustCompile(`(?m)^small/qid0000000000\s+Pending\s+-\s+-\s+-\s`).MatchString(out) {
		t.Errorf("access ls of Merritt's own request, want ARK, WHAT and FORMAT -:\n%s", out)
	}
}
