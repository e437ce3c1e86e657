//go:build linux

package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon with API tokens asks one of them on its NATS listener: the CLI
// without one, with a wrong one or a scoped one is refused, in words that
// name --nats-token and --api-tokens; a read token replays, but its forged
// event is refused, never recorded nor relayed on the API's event stream,
// and an action with it is made but said not recorded, in plain words; no
// role deletes or purges the stream; an operate token's action is
// recorded; a SIGHUP that revokes a subscribed token disconnects it.
func TestEmbeddedNATSAsksForAToken(t *testing.T) {
	t.Parallel()
	const (
		readTok    = "read-token-0123456789abcdef"
		operateTok = "operate-token-0123456789abcdef"
		scopedTok  = "scoped-token-0123456789abcdef"
	)
	file := filepath.Join(t.TempDir(), "tokens")
	writeTokens := func(lines string) {
		if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens("read " + readTok + " reader\noperate " + operateTok + " operator\noperate:demo " + scopedTok + " Alpha\n")
	listen := natstest.FreeAddr(t)
	url := "nats://" + listen
	root := zktest.Root(t)
	d := startDaemon(t, daemonConfig{Host: "tokens", ZK: zktest.Shared(t).Addr, Root: root,
		Extra: []string{"--api-tokens", file, "--nats-listen", listen}})
	r := natsClients{t: t, zk: zktest.Shared(t).Addr, root: root, url: url}

	for name, flags := range map[string][]string{
		"no token":     nil,
		"a wrong one":  {"--nats-token", "wrong-token-0123456789abcdef"},
		"a scoped one": {"--nats-token", scopedTok},
	} {
		_, stderr, code := r.cli(append([]string{"events", "replay"}, flags...)...)
		if code != 1 || !strings.Contains(stderr, "--nats-token or INGESTQ_NATS_TOKEN") || !strings.Contains(stderr, "serve --api-tokens") {
			t.Errorf("events replay with %s: exit %d, stderr %q: want 1, naming --nats-token and --api-tokens", name, code, stderr)
		}
	}
	d.waitLog(10*time.Second, "the token of Alpha is scoped to profiles: NATS carries the whole queue's events")

	if _, stderr, code := r.cli("hold", "queue", "--nats-token", operateTok); code != 0 || stderr != "" {
		t.Fatalf("hold queue with an operate token: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code := r.cli("release", "queue", "--nats-token", readTok)
	if code != 0 || !strings.Contains(stderr, "its event is not recorded") || !strings.Contains(stderr, "needs an operate or admin token") {
		t.Errorf("release queue with a read token: exit %d, stderr %q: want 0 and a warning that the token may not publish", code, stderr)
	}

	api := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.logText())
	if api == nil {
		t.Fatalf("no http= in the log")
	}
	relayed := sse(t, api[1]+"/api/v1/events", operateTok)
	reader, err := nats.Connect(url, nats.Token(readTok), nats.ReconnectWait(10*time.Millisecond), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatalf("a read token: %v", err)
	}
	defer reader.Close()
	closed := make(chan struct{})
	reader.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if _, err := reader.SubscribeSync(events.SubjectAll); err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(events.Event{ID: "forged", Time: time.Now(), Kind: events.KindJob, JobID: "jid0000000009", To: "Completed"})
	if err := reader.Publish("ingestq.job.completed.jid0000000009", forged); err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil || !errors.Is(reader.LastError(), nats.ErrPermissionViolation) {
		t.Fatalf("a read token's forged event: flush %v, last error %v; want a permissions violation", err, reader.LastError())
	}
	if _, stderr, code := r.cli("release", "queue", "--nats-token", operateTok); code != 0 || stderr != "" {
		t.Fatalf("release queue with an operate token: exit %d, stderr %q", code, stderr)
	}
	for data := ""; !strings.Contains(data, `"release"`); {
		if data = receiveLine(t, relayed, "the release relayed"); strings.Contains(data, "forged") {
			t.Fatalf("the API's event stream relayed the forged event: %s", data)
		}
	}
	out, stderr, code := r.cli("events", "replay", "--nats-token", readTok)
	if code != 0 || strings.Count(out, "by ") != 2 || strings.Contains(out, "jid0000000009") {
		t.Fatalf("events replay with a read token: exit %d, stderr %q:\n%s\nwant the operate token's hold and release, not the forged event", code, stderr, out)
	}
	// The CLI takes its replies under the token's own inbox prefix (the
	// replay above); another client is told it by events inbox-prefix, and
	// one under nats.go's _INBOX is refused its replies, which the daemon
	// says in its words.
	if _, stderr, code := r.cli("events", "inbox-prefix"); code != 2 || !strings.Contains(stderr, "--nats-token or INGESTQ_NATS_TOKEN") {
		t.Errorf("events inbox-prefix without a token: exit %d, stderr %q: want 2, naming --nats-token", code, stderr)
	}
	prefix, stderr, code := r.cli("events", "inbox-prefix", "--nats", "nats://"+readTok+"@"+listen)
	if prefix = strings.TrimSpace(prefix); code != 0 || prefix != events.InboxPrefix(readTok) {
		t.Fatalf("events inbox-prefix of a token in --nats: exit %d, %q, stderr %q: want %s", code, prefix, stderr, events.InboxPrefix(readTok))
	}
	third, err := nats.Connect(url, nats.Token(readTok), nats.CustomInboxPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if ids := replayIDs(t, third); len(ids) == 0 {
		t.Errorf("a client under the prefix printed replays nothing")
	}
	unprefixed, err := nats.Connect(url, nats.Token(readTok), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer unprefixed.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	js, _ := jetstream.New(unprefixed)
	if _, err := js.Stream(ctx, events.DefaultStream); err == nil || !errors.Is(unprefixed.LastError(), nats.ErrPermissionViolation) {
		t.Errorf("a client under _INBOX reads the stream's info: %v (last error %v), want its reply refused", err, unprefixed.LastError())
	}
	d.waitLog(10*time.Second, "events: a NATS client may not read replies there: a token's client takes them under the token's own inbox prefix")

	for _, token := range []string{readTok, operateTok} {
		nc, err := nats.Connect(url, append(asTokenClient(token), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		s, err := js.Stream(t.Context(), events.DefaultStream)
		if err != nil {
			t.Fatalf("%s reads the stream's info: %v", token, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if err := js.DeleteStream(ctx, events.DefaultStream); err == nil {
			t.Errorf("%s deleted the stream", token)
		}
		cancel()
		ctx, cancel = context.WithTimeout(t.Context(), time.Second)
		if err := s.Purge(ctx); err == nil {
			t.Errorf("%s purged the stream", token)
		}
		cancel()
		nc.Close()
	}
	if out, _, _ := r.cli("events", "replay", "--nats-token", readTok); strings.Count(out, "by ") != 2 {
		t.Fatalf("after the tokens tried to delete and purge it, the stream holds:\n%s", out)
	}
	// A token in --nats as nats.go reads it, with no scheme or with blanks
	// around, is the one whose prefix the CLI takes, and is shown masked.
	for _, at := range []string{readTok + "@" + listen, " nats://" + readTok + "@" + listen + " ,"} {
		prefix, stderr, code := r.cli("events", "inbox-prefix", "--nats", at)
		if prefix = strings.TrimSpace(prefix); code != 0 || prefix != events.InboxPrefix(readTok) {
			t.Errorf("events inbox-prefix --nats %q: exit %d, %q, stderr %q: want %s", at, code, prefix, stderr, events.InboxPrefix(readTok))
		}
		out, stderr, code := r.cli("events", "replay", "--nats", at)
		if code != 0 || strings.Count(out, "by ") != 2 || strings.Contains(stderr, readTok) {
			t.Errorf("events replay --nats %q: exit %d, stderr %q:\n%s\nwant the hold and release, the token not shown", at, code, stderr, out)
		}
	}
	const wrongTok = "wrong-token-0123456789abcdef"
	if _, stderr, code := r.cli("events", "replay", "--nats", wrongTok+"@"+listen); code != 1 ||
		!strings.Contains(stderr, "refused the credentials") || strings.Contains(stderr, wrongTok) {
		t.Errorf("events replay --nats WRONG@%s: exit %d, stderr %q: want 1, refused, the token not shown", listen, code, stderr)
	}
	// serve joining that NATS with a token before its host, no scheme,
	// refused: its words name the NATS with the token masked.
	joinCtx, joinCancel := context.WithTimeout(t.Context(), time.Minute)
	joined := exec.CommandContext(joinCtx, ingestqBin, "--zk", r.zk, "--zk-root", zktest.Root(t), "serve", "--host", "joiner",
		"--nats", wrongTok+"@"+listen, "--http", "off", "--data-dir", t.TempDir())
	joinedOut, joinErr := joined.CombinedOutput()
	joinCancel()
	if joinErr == nil || !strings.Contains(string(joinedOut), "refused the credentials") || strings.Contains(string(joinedOut), wrongTok) {
		t.Errorf("serve --nats WRONG@%s: %v:\n%s\nwant refused, the token not shown", listen, joinErr, joinedOut)
	}
	for _, action := range []string{"hold", "release"} {
		if _, stderr, code := r.cli(action, "queue", "--nats", operateTok+"@"+listen); code != 0 || stderr != "" {
			t.Errorf("%s queue --nats OPERATE@%s: exit %d, stderr %q: want recorded, nothing said", action, listen, code, stderr)
		}
	}

	tail := exec.Command(ingestqBin, "--zk", r.zk, "--zk-root", root, "--nats", url, "--nats-token", readTok, "events", "tail")
	tailErr, err := tail.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tail.Process.Kill() }()
	tailLines := bufio.NewScanner(tailErr)
	for tailLines.Scan() && !strings.Contains(tailLines.Text(), "waiting for events") {
	}

	writeTokens("operate " + operateTok + " operator\n")
	d.signal(syscall.SIGHUP)
	d.waitLog(10*time.Second, "API tokens reloaded")
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the revoked read token's subscriber is still connected (%v)", reader.Status())
	}
	if !events.AuthRefused(reader.LastError()) {
		t.Errorf("the revoked token reconnecting: %v, want refused", reader.LastError())
	}
	var said strings.Builder
	for tailLines.Scan() {
		said.WriteString(tailLines.Text() + "\n")
	}
	t.Logf("events tail after its token was revoked: %s", said.String())
	if err := tail.Wait(); tail.ProcessState.ExitCode() != 1 || !strings.Contains(said.String(), "--nats-token or INGESTQ_NATS_TOKEN") {
		t.Errorf("events tail with the revoked token: %v, stderr %q: want exit 1 saying the token was refused", err, said.String())
	}
}

// sse reads the API's event stream at url with token: each data line.
func sse(t *testing.T, url, token string) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	lines := make(chan string, 100)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- data
			}
		}
	}()
	return lines
}

func receiveLine(t *testing.T, lines <-chan string, what string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// A rolling upgrade that gives the API tokens to the new hosts: a host of
// this build with --api-tokens beside two of the previous release without
// routes and records as before (the routes ask nothing of the clients'
// tokens): a batch worked across the three has every timeline whole
// through each host's listener, the new one's with a read token, which
// refuses a client without one.
func TestTokensOnAnUpgradedHostBesideOldOnes(t *testing.T) {
	t.Parallel()
	old := buildPreviousRelease(t)
	const readTok = "read-token-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("read "+readTok+" reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newClusterRig(t)
	for name, c := range map[string]daemonConfig{"d1": {Bin: old}, "d2": {Bin: old}, "d3": {Extra: []string{"--api-tokens", file}}} {
		r.launch(name, c, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	all := []string{"d1", "d2", "d3"}
	r.waitJoined(all...)
	batches := r.finish([]string{createBatch(t, r.q, upgradeJobs)}, upgradeJobs)
	r.waitEventsTaken(all...)
	through := r.listeners("d1", "d2")
	// This build's CLI, given a token, takes its replies under the
	// token's inbox prefix, which the previous release's listener (d1:
	// no permissions) lets it read as any other.
	for _, name := range []string{"d1", "d3"} {
		through[name] = strings.Replace(r.hosts[name].url, "nats://", "nats://"+readTok+"@", 1)
	}
	r.assertEveryTimeline(batches, through)
	if nc, err := nats.Connect(r.hosts["d3"].url); !events.AuthRefused(err) {
		if nc != nil {
			nc.Close()
		}
		t.Errorf("the new host's listener without a token: %v, want refused", err)
	}
	for _, name := range all {
		r.hosts[name].stop(30 * time.Second)
		r.hosts[name].assertNoLoss()
	}
}

// A read token on a real daemon may not become the daemon: from the IDs of
// the events it reads (an operator's holds and releases of a batch through
// the API, which the daemon records) it enumerates the passwords of the
// daemon's internal user that a nuid generator would have made before
// them, and tries each on the listener; a client presenting that user is
// refused whatever its password, said in the daemon's log, and the stream
// keeps its events.
func TestReadTokenCannotBecomeTheDaemon(t *testing.T) {
	t.Parallel()
	const (
		readTok    = "read-token-0123456789abcdef"
		operateTok = "operate-token-0123456789abcdef"
	)
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("read "+readTok+" reader\noperate "+operateTok+" operator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := natstest.FreeAddr(t)
	url := "nats://" + listen
	zk, root := zktest.Shared(t).Addr, zktest.Root(t)
	d := startDaemon(t, daemonConfig{Host: "becomes", ZK: zk, Root: root, Extra: []string{"--api-tokens", file, "--nats-listen", listen}})
	r := natsClients{t: t, zk: zk, root: root, url: url}
	if _, stderr, code := r.cli("hold", "queue", "--nats-token", operateTok); code != 0 {
		t.Fatalf("hold queue: exit %d, %s", code, stderr)
	}
	bid := createBatch(t, openQueue(t, zk, root), 1) // stays Pending: the queue is held
	api := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(d.logText())
	if api == nil {
		t.Fatalf("no http= in the log")
	}
	for range 3 {
		for _, action := range []string{"hold", "release"} {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", api[1]+"/api/v1/batches/"+bid+"/"+action, nil)
			req.Header.Set("Authorization", "Bearer "+operateTok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s: %s", action, bid, resp.Status)
			}
		}
	}
	reader, err := nats.Connect(url, asTokenClient(readTok)...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	recorded := replayIDs(t, reader)
	var daemons []string // the IDs the daemon's API made: like the last one's
	for _, id := range recorded {
		if last := recorded[len(recorded)-1]; len(id) == len(last) && id[:12] == last[:12] {
			daemons = append(daemons, id)
		}
	}

	step := natstest.NuidStep(daemons)
	for k := int64(1); step != 0 && k <= 5000; k++ {
		password := natstest.NuidAt(daemons[0], natstest.NuidSeq(daemons[0])-k*step)
		nc, err := nats.Connect(url, nats.UserInfo("ingestq-bus", password), nats.NoReconnect())
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if js, err := jetstream.New(nc); err == nil {
			if s, err := js.Stream(ctx, events.DefaultStream); err == nil && s.Purge(ctx) == nil {
				t.Errorf("a read token found the daemon's password %d nuids before an event's ID, and purged the stream", k)
			}
		}
		cancel()
		nc.Close()
		break
	}
	if nc, err := nats.Connect(url, nats.UserInfo("ingestq-bus", "guess"), nats.NoReconnect()); !events.AuthRefused(err) {
		nc.Close()
		t.Errorf("a client presenting the daemon's internal user: %v, want refused", err)
	}
	d.waitLog(10*time.Second, "it presented the daemon's internal user ingestq-bus, which only the daemon's own in-process connections may")
	if after := replayIDs(t, reader); len(after) != len(recorded) {
		t.Errorf("the stream holds %d events, want the %d recorded", len(after), len(recorded))
	}
}

// asTokenClient are the options of a client presenting token to a daemon
// with API tokens: the token, and its replies under the token's own inbox
// prefix, as the CLI takes them.
func asTokenClient(token string) []nats.Option {
	return []nats.Option{nats.Token(token), nats.CustomInboxPrefix(events.InboxPrefix(token))}
}

// replayIDs are the IDs of the events nc replays from the stream.
func replayIDs(t *testing.T, nc *nats.Conn) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var ids []string
	if err := events.Replay(ctx, nc, "", events.Filter{}, func(e events.Event) error {
		ids = append(ids, e.ID)
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return ids
}
