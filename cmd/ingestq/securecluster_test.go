//go:build linux

package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// A cluster of three daemons as a production site deploys it, every guard
// at once: routes with TLS and the cluster's secret, listeners with TLS
// asking the API's tokens, /metrics asking a token. Two batches submitted
// by the CLI with an operate token; the daemon leading the stream
// SIGKILLed in the first, another SIGTERMed in the second, each started
// again: both complete, every timeline replays whole and once through
// each listener with a read token; a read token's forged events are
// refused and never replayed; /metrics and /debug/pprof/ ask their
// tokens; no daemon logs an error the test did not cause.
func TestSecureClusterKilledAndStopped(t *testing.T) {
	t.Parallel()
	start := time.Now()
	const (
		adminTok   = "admin-token-0123456789abcdef"
		operateTok = "operate-token-0123456789abcdef"
		readTok    = "read-token-0123456789abcdef"
		jobs       = 150
	)
	dir := t.TempDir()
	tokens, secret := filepath.Join(dir, "tokens"), filepath.Join(dir, "cluster-secret")
	for file, text := range map[string]string{
		tokens: "admin " + adminTok + " admin\noperate " + operateTok + " operator\nread " + readTok + " reader\n",
		secret: "0123456789abcdef-the-rig-s-cluster-secret\n",
	} {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca := tlstest.NewAuthority(t)
	r := newClusterRig(t)
	r.clientEnv = []string{"INGESTQ_NATS_TOKEN=" + readTok, "INGESTQ_NATS_TLS_CA=" + ca.CAFile}
	r.clientOpts = append(asTokenClient(readTok), nats.RootCAs(ca.CAFile))
	r.metricsToken = readTok
	r.submittedByCLI = true
	all := []string{"d1", "d2", "d3"}
	flags := map[string][]string{}
	for _, name := range all {
		cert, key := ca.Peer(t, name, "127.0.0.1")
		flags[name] = []string{"--nats-cluster-tls-cert", cert, "--nats-cluster-tls-key", key, "--nats-cluster-tls-ca", ca.CAFile,
			"--nats-cluster-secret-file", secret, "--nats-listen-tls-cert", cert, "--nats-listen-tls-key", key,
			"--api-tokens", tokens, "--metrics-auth", "token"}
		r.launch(name, daemonConfig{Extra: flags[name]}, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	r.waitJoined(all...)
	info := r.waitStream("d1", 3, "")
	var daemons []*daemon // every process, the ones killed and stopped too
	for _, name := range all {
		daemons = append(daemons, r.hosts[name].daemon)
	}

	submit := func() string {
		t.Helper()
		url := strings.Join([]string{r.hosts["d1"].url, r.hosts["d2"].url, r.hosts["d3"].url}, ",")
		cmd := exec.Command(ingestqBin, "--zk", r.zk, "--zk-root", r.root, "--nats", url, "submit", "--profile", "demo", fmt.Sprintf("passthrough:%d", jobs))
		cmd.Env = append(os.Environ(), "INGESTQ_NATS_TOKEN="+operateTok, "INGESTQ_NATS_TLS_CA="+ca.CAFile)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Fatalf("submit with an operate token: %v, stderr %q", err, stderr.String())
		}
		return strings.TrimSpace(strings.SplitN(stdout.String(), "\n", 2)[0])
	}
	// submitMidBatch submits a batch and waits until some of its jobs,
	// not all, are Completed.
	submitMidBatch := func() string {
		t.Helper()
		done := completedRefs(t, r.q)
		bid := submit()
		poll(t, 60*time.Second, "a job of batch "+bid+" Completed, not all", func() (bool, string, error) {
			n := completedRefs(t, r.q) - done
			return n > 0 && n < jobs, fmt.Sprintf("%d Completed", n), nil
		})
		return bid
	}

	killed := ""
	for _, name := range all {
		if "ingestq-"+name == info.Cluster.Leader {
			killed = name
		}
	}
	if killed == "" {
		t.Fatalf("the stream's leader %q is none of the daemons' servers", info.Cluster.Leader)
	}
	bid1 := submitMidBatch()
	h := r.hosts[killed]
	h.kill()
	r.launch(killed, daemonConfig{DataDir: h.dataDir, Extra: flags[killed]}, strings.TrimPrefix(h.url, "nats://"), h.cluster)
	r.waitJoined(killed)
	daemons = append(daemons, r.hosts[killed].daemon)
	t.Logf("SIGKILLed %s, whose server led the stream, mid-batch, and started it again after %v", killed, time.Since(start).Round(time.Millisecond))

	stopped := all[0]
	if stopped == killed {
		stopped = all[1]
	}
	bid2 := submitMidBatch()
	r.restart(stopped, flags[stopped]...)
	daemons = append(daemons, r.hosts[stopped].daemon)
	t.Logf("SIGTERMed %s mid-batch, and started it again after %v", stopped, time.Since(start).Round(time.Millisecond))

	batches := r.finish([]string{bid1, bid2}, jobs)
	r.waitEventsTaken(all...)

	url := r.hosts["d1"].url
	if nc, err := nats.Connect(url, nats.Token(readTok)); err == nil || !strings.Contains(err.Error(), "tls") {
		if nc != nil {
			nc.Close()
		}
		t.Errorf("a client without the CA: %v, want a TLS failure", err)
	}
	if nc, err := nats.Connect(url, nats.RootCAs(ca.CAFile)); !events.AuthRefused(err) {
		if nc != nil {
			nc.Close()
		}
		t.Errorf("a client over TLS without a token: %v, want refused", err)
	}
	var forged []string
	for _, name := range all {
		nc, err := nats.Connect(r.hosts[name].url, append(r.clientOpts, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
		if err != nil {
			t.Fatalf("%s's listener with a read token over TLS: %v", name, err)
		}
		id := "forged-through-" + name
		forged = append(forged, id)
		jid := batches[bid1][0]
		e, _ := json.Marshal(events.Event{ID: id, Time: time.Now(), Kind: events.KindJob, BatchID: bid1, JobID: jid,
			From: "Notify", To: "Completed", Host: name})
		if err := nc.Publish("ingestq.job.completed."+jid, e); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil || !errors.Is(nc.LastError(), nats.ErrPermissionViolation) {
			t.Errorf("a read token's forged event through %s: flush %v, last error %v; want a permissions violation", name, err, nc.LastError())
		}
		nc.Close()
	}
	r.assertEveryTimeline(batches, r.listeners(all...))
	for _, name := range all {
		evs, err := r.replay(r.hosts[name].url, bid1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if slices.Contains(forged, e.ID) {
				t.Errorf("%s's listener replays the forged event %s", name, e.ID)
			}
		}
	}

	for _, name := range all {
		api := regexp.MustCompile(`http=(http://\S+)`).FindStringSubmatch(r.hosts[name].logText())
		if api == nil {
			t.Fatalf("no http= in %s's log", name)
		}
		for _, c := range []struct {
			path, token string
			want        int
		}{
			{"/metrics", readTok, http.StatusOK},
			{"/metrics", "", http.StatusUnauthorized},
			{"/debug/pprof/heap", adminTok, http.StatusOK},
			{"/debug/pprof/heap", readTok, http.StatusForbidden},
		} {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", api[1]+c.path, nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s GET %s with token %q: %s, want %d", name, c.path, c.token, resp.Status, c.want)
			}
		}
	}

	for _, name := range all {
		r.hosts[name].stop(30 * time.Second)
		r.hosts[name].assertNoLoss()
	}
	// None allowed: the refusals the test causes (the forged publishes, the
	// 401 and 403) are not errors of the daemon's, a SIGKILLed peer's
	// route and an election are warned of, and the restarted hosts take
	// up their work without one.
	for _, d := range daemons {
		for _, l := range d.logLines(" ERR ") {
			t.Errorf("%s (pid %d) logged an error the test did not cause: %s", d.name, d.cmd.Process.Pid, l)
		}
	}
	t.Logf("a secure cluster killed and stopped in %v", time.Since(start).Round(time.Millisecond))
}
