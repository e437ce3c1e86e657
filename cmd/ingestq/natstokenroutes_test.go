package main_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// A token's subscriber on a cluster member's listener stays connected
// through the member's route changes (a host joining, another stopping)
// and a change of its routes' CA (SIGHUP), each a reload of nats-server's
// options, and receives every event recorded meanwhile: a batch runs
// after each of them. nats-server's lines about the token's client still
// name the token's holder: its refused inbox, its refused publish.
//
// Before: each reload closed the client (nats-server closes every client
// whose user name it does not know, and the token's client was registered
// under its holder's name, decision 959); it reconnected ~2 s later and
// missed, core NATS, the events published meanwhile.
func TestTokenClientsKeptAcrossRouteChangesAndCAReloads(t *testing.T) {
	t.Parallel()
	const readTok = "read-token-0123456789abcdef"
	const jobs = 24
	ca, newCA := tlstest.NewAuthority(t), tlstest.NewAuthority(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("read "+readTok+" reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newClusterRig(t)
	r.clientEnv, r.clientOpts = []string{"INGESTQ_NATS_TOKEN=" + readTok}, asTokenClient(readTok)
	caFile := map[string]string{}
	launch := func(name string) {
		caFile[name] = filepath.Join(dir, name+"-ca.pem")
		writeCABundle(t, caFile[name], ca)
		cert, key := ca.Peer(t, name, "127.0.0.1")
		r.launch(name, daemonConfig{Extra: []string{"--nats-cluster-tls-cert", cert, "--nats-cluster-tls-key", key,
			"--nats-cluster-tls-ca", caFile[name], "--api-tokens", tokens}}, natstest.FreeAddr(t), natstest.FreeAddr(t))
	}
	launch("c1")
	launch("c2")
	r.waitJoined("c1", "c2")
	c1 := r.hosts["c1"]

	rec, disconnects := recordAsToken(t, c1.url, readTok)

	// step does what changes c1's routes or CA, waits until c1 has given
	// nats-server its new options (said after ReloadOptions returned),
	// and starts a batch: before, the subscriber was away for the ~2 s
	// after the reload.
	var bids []string
	step := func(what, reloaded string, change func()) {
		t.Helper()
		n := len(c1.logLines(reloaded))
		change()
		poll(t, 60*time.Second, "c1 reloaded its NATS server's options: "+what, func() (bool, string, error) {
			return len(c1.logLines(reloaded)) > n, "", nil
		})
		bids = append(bids, createBatch(t, r.q, jobs))
		if d := disconnects.Load(); d != 0 {
			t.Errorf("%s: the token's subscriber on c1 was disconnected %d times, want none", what, d)
		}
	}
	const rerouted = "events: embedded NATS server routes changed"
	step("c3 joins", rerouted, func() {
		launch("c3")
		r.waitJoined("c3")
		// c3's stream replica current: c3 is routed to c1 and knows the
		// subscriber's interest (an event c3 published before would not reach
		// it, subscriber connected or not), and c2 may stop without the
		// stream losing its quorum.
		r.waitStream("c1", 3, "")
	})
	step("c2 stops", rerouted, func() { r.hosts["c2"].stop(30 * time.Second) })
	step("c1's routes' CA changes (SIGHUP)", "the NATS routes verify the other servers against the CA file in force", func() {
		writeCABundle(t, caFile["c1"], ca, newCA)
		c1.signal(syscall.SIGHUP)
	})

	r.finish(bids, jobs)
	for _, bid := range bids {
		stored, err := r.replay(c1.url, bid)
		if err != nil {
			t.Fatal(err)
		}
		rec.waitForDiag(30*time.Second, fmt.Sprintf("the subscriber to have seen the %d events of batch %s", len(stored), bid),
			func(seen []events.Event) bool { return len(missing(stored, seen)) == 0 },
			func() string { return fmt.Sprintf("missing %q", missing(stored, rec.snapshot())) })
	}
	if n := rec.nc.Stats().Reconnects; n != 0 || disconnects.Load() != 0 {
		t.Errorf("the token's subscriber reconnected %d times, was disconnected %d times: want none", n, disconnects.Load())
	}

	// nats-server's lines about a token's client name the holder.
	unprefixed, err := nats.Connect(c1.url, nats.Token(readTok), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
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
	if err := unprefixed.Publish("ingestq.job.completed.jid0000000001", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	const inboxRefused, publishRefused = "events: a NATS client may not read replies there", "Publish Violation - Subject"
	c1.waitLog(10*time.Second, inboxRefused)
	c1.waitLog(10*time.Second, publishRefused)
	for _, line := range []string{inboxRefused, publishRefused} {
		if got := c1.logLines(line); len(got) != 1 || !strings.Contains(got[0], "token=reader") {
			t.Errorf("c1's lines %q: %q, want one, naming the token's holder (token=reader)", line, got)
		}
	}
}

// recordAsToken is record as a client of token (asTokenClient), with the
// count of its disconnections.
func recordAsToken(t *testing.T, url, token string) (*recorder, *atomic.Int32) {
	t.Helper()
	disconnects := &atomic.Int32{}
	rec := record(t, url, append(asTokenClient(token), nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
		disconnects.Add(1)
		t.Logf("the token's client was disconnected: %v", err)
	}))...)
	return rec, disconnects
}

// missing are the IDs of the events of want that are not in seen.
func missing(want, seen []events.Event) []string {
	have := map[string]bool{}
	for _, e := range seen {
		have[e.ID] = true
	}
	var out []string
	for _, e := range want {
		if !have[e.ID] {
			out = append(out, e.ID)
		}
	}
	return out
}
