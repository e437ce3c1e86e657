package events

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/natstest"
)

// A replay asked of a member cut off from its quorum (the two others
// stopped: no meta leader, as while a split heals and the cluster elects
// one) waits for the cluster, and once the others are back where they were
// it delivers every event, well within its deadline; one whose quorum
// does not come back ends by its deadline saying why. Before, the stream's
// info request, lost in the cluster without a leader, waited out the
// whole deadline and ended with "context deadline exceeded": an `events
// replay` right after a split healed was refused or hung in 2 of 6 runs
// (decision 903), and the first replay after a heal hung a minute in 5 of
// 8 runs of a test.
func TestReplayWaitsForTheClusterToReform(t *testing.T) {
	t.Parallel()
	fast := func(cfg *Config) { cfg.ackTimeout = time.Second }
	ms := openClusterWith(t, fast, "a", "b", "c")
	a, b, c := ms[0], ms[1], ms[2]
	publishN(t, c, "bid-1", 2)
	waitThreeCurrent(t, a)
	for _, m := range []*member{a, b} {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cli := connect(t, c.ClientURL())

	// The quorum stays away: the replay ends at its deadline, saying why.
	short, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	err := Replay(short, cli, "", Filter{}, func(Event) error { return nil })
	// By its deadline: without it the replay waited for the quorum, for
	// good. The bound leaves a loaded machine's late wake-up its slack.
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "the event stream did not answer") || took > 10*time.Second {
		t.Errorf("a replay without a quorum, deadline 3 s: %v after %v; want it to say the stream did not answer, by its deadline", err, took)
	}

	// The quorum comes back while the replay waits.
	asked := natstest.Requests(t, c.ClientURL(), "$JS.API.STREAM.INFO."+DefaultStream)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	long, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	go func() {
		n := 0
		err := Replay(long, cli, "", Filter{}, func(Event) error { n++; return nil })
		done <- result{n, err}
	}()
	receive(t, asked, "the replay's first request")
	start = time.Now()
	again := func(m *member) func(*Config) {
		return func(cfg *Config) { fast(cfg); cfg.DataDir, cfg.Cluster = m.cfg.DataDir, m.cfg.Cluster }
	}
	openMemberWith(t, "a", again(a), c)
	openMemberWith(t, "b", again(b), c)
	got := receive(t, done, "the replay's end")
	t.Logf("the replay ended %v after the quorum came back: %d events, %v", time.Since(start), got.n, got.err)
	if got.err != nil || got.n != 2 {
		t.Errorf("a replay waiting for its quorum, once it is back: %d events, %v; want the 2, no error", got.n, got.err)
	}
}
