package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A replay started while two of the stream's three servers are down
// (JetStream unavailable: no meta leader, no stream leader) says once that
// it waits, and once they are back prints every event, each once. Before,
// it exited 1 at once (the stream's info request timed out; a 503,
// "JetStream system temporarily unavailable", is the other answer).
func TestReplayWaitsOutAClusterReforming(t *testing.T) {
	t.Parallel()
	const n = 40
	opts := natstest.ClusterOptions(t, 3)
	servers := make([]*server.Server, 3)
	for i, o := range opts {
		servers[i] = natstest.Run(t, o)
	}
	url := servers[0].ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for try := 1; ; try++ {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: events.DefaultStream, Subjects: []string{events.SubjectAll}, Replicas: 3})
		if err == nil {
			break
		}
		if !events.Unavailable(nc, err) { // else the meta leader is not elected yet
			t.Fatal(err)
		}
		backoff.Sleep(ctx, backoff.Delay(50*time.Millisecond, time.Second, try))
	}
	for i := range n {
		ev := events.Event{ID: fmt.Sprintf("ev-%02d", i), Kind: events.KindJob, JobID: fmt.Sprintf("jid%010d", i), To: "Pending"}
		data, _ := json.Marshal(ev)
		if _, err := js.Publish(ctx, ev.Subject(), data); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	for _, ns := range servers[1:] {
		ns.Shutdown()
		ns.WaitForShutdown()
	}

	stderr := newWatchedLog("waiting up to 30s for it")
	var stdout bytes.Buffer
	exited := make(chan int, 1)
	args := []string{"--zk", zktest.Shared(t).Addr, "--zk-root", zktest.Root(t), "--nats", url, "events", "replay", "-o", "json"}
	go func() { exited <- cli.Run(ctx, args, &stdout, stderr, func(string) string { return "" }) }()
	select {
	case code := <-exited:
		t.Fatalf("the replay ended (exit %d) without waiting for the cluster; stderr:\n%s", code, stderr.String())
	case <-stderr.seen:
	}
	for _, o := range opts[1:] {
		natstest.Run(t, o) // the same names, routes and stores
	}
	code := <-exited
	t.Logf("stderr:\n%s", stderr.String())
	wantCode(t, code, 0)
	if got := len(stderr.Lines("note: the event stream")); got != 1 {
		t.Errorf("the wait is said %d times, want once", got)
	}
	evs := parseEvents(t, stdout.String())
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.ID] {
			t.Errorf("event %s printed twice", ev.ID)
		}
		seen[ev.ID] = true
	}
	if len(seen) != n {
		t.Errorf("%d events replayed, want %d", len(seen), n)
	}
}

// A NATS without JetStream (--nats naming the wrong server) never answers
// for the stream: the replay exits 1 at once, without waiting.
func TestReplayWithoutJetStreamFailsAtOnce(t *testing.T) {
	t.Parallel()
	ns := startNATSServer(t, &server.Options{})
	start := time.Now()
	_, stderr, code := runEnv(t, nil, "--zk", zktest.Shared(t).Addr, "--zk-root", zktest.Root(t), "--nats", ns.ClientURL(), "events", "replay")
	wantCode(t, code, 1)
	if strings.Contains(stderr, "waiting up to") {
		t.Errorf("a NATS without JetStream is waited for: %q", stderr)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the replay took %v to fail", took)
	}
}
