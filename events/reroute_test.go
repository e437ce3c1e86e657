package events

import (
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
)

// disconnectedLine is the warning of a bus whose connection dropped.
const disconnectedLine = "events: NATS disconnected, reconnecting"

// A member whose routes change (a host joining, then stopping and being
// dropped from its routes: each a ReloadOptions of its server) keeps its
// own connection and warns of nothing. Before, the reload closed every
// connection that had presented a user name unknown to nats-server's own
// user list, the bus's internal user among them: each host logged "NATS
// disconnected, reconnecting err=EOF" at every membership change. A
// disconnect the daemon did not cause still warns. A token's client on b's
// listener is kept too, and receives the events published after each
// change; before, the reload closed it as well (it was registered under
// its holder's name) and it reconnected ~2 s later.
func TestRouteChangesKeepConnections(t *testing.T) {
	t.Parallel()
	recs := map[string]*logRecorder{"a": {}, "b": {}}
	recorded := func(host string) func(*Config) {
		return func(c *Config) { c.Logger = slog.New(recs[host]) }
	}
	tokens := newTestTokens()
	a := openMemberWith(t, "a", recorded("a"))
	b := openMemberWith(t, "b", func(c *Config) { recorded("b")(c); c.ClientTokens = tokens.lookup }, a)
	a.SetRoutes([]string{b.route})
	publishN(t, a, "bid-1", 1)
	const rerouted = "events: embedded NATS server routes changed"
	joined := map[string]uint64{"a": a.Conn().Stats().Reconnects, "b": b.Conn().Stats().Reconnects} // a's from alone to member
	var readerDisconnects atomic.Int32
	reader, err := connectWith(t, b.ClientURL(), nats.Token(readToken),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { readerDisconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan *nats.Msg, 10)
	if _, err := reader.ChanSubscribe("ingestq.job.>", read); err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}

	c := openMember(t, "c", a, b)
	a.SetRoutes([]string{b.route, c.route})
	b.SetRoutes([]string{a.route, c.route})
	waitFor(t, "a and b routed to c", func() bool {
		return recs["a"].count(slog.LevelInfo, rerouted) == 1 && recs["b"].count(slog.LevelInfo, rerouted) == 1
	})
	publishN(t, c, "bid-2", 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	a.SetRoutes([]string{b.route}) // c's node went
	b.SetRoutes([]string{a.route})
	waitFor(t, "a and b routed without c", func() bool {
		return recs["a"].count(slog.LevelInfo, rerouted) == 2 && recs["b"].count(slog.LevelInfo, rerouted) == 2
	})
	// A connection the reload closed is seen at the next publish at the
	// latest: its acknowledgement needs the reconnect.
	publishN(t, a, "bid-3", 1)
	publishN(t, b, "bid-3", 1)
	for host, m := range map[string]*member{"a": a, "b": b} {
		if n, w := m.Conn().Stats().Reconnects-joined[host], recs[host].count(slog.LevelWarn, disconnectedLine); n != 0 || w != 0 {
			t.Errorf("%s, its routes changed twice: its connection reconnected %d times, %d warnings %q; want none", host, n, w, disconnectedLine)
		}
	}
	wantSeen(t, a, map[string]int{"a": 2, "b": 1, "c": 1})
	if n, d := reader.Stats().Reconnects, readerDisconnects.Load(); n != 0 || d != 0 {
		t.Errorf("the token's client on b, b's routes changed twice: reconnected %d times, disconnected %d; want none", n, d)
	}
	// bid-2's and bid-3's, each once at least: a publish its stream did not
	// acknowledge in time is sent again.
	from := map[string]string{} // host by event ID
	for len(from) < 3 {
		var e Event
		if m := receive(t, read, "the token's client reads the events published after the changes"); json.Unmarshal(m.Data, &e) == nil {
			from[e.ID] = e.Host
		}
	}
	if hosts := slices.Sorted(maps.Values(from)); !slices.Equal(hosts, []string{"a", "b", "c"}) {
		t.Errorf("the token's client read events of %q, want one each of a, b and c", hosts)
	}
	// Its rights are its token's still: it replays under its own inbox
	// prefix, and may not publish.
	if got := replay(t, reader, Filter{}); len(got) != 4 {
		t.Errorf("the token's client replays %d events after the changes, want 4", len(got))
	}
	if err := reader.Publish("ingestq.job.completed.jid-forged", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil || !errors.Is(reader.LastError(), nats.ErrPermissionViolation) {
		t.Errorf("the read token's publish after the changes: flush %v, last error %v; want a permissions violation", err, reader.LastError())
	}

	// The server dropping the bus's connection is no route change: warned of.
	warned := recs["a"].count(slog.LevelWarn, disconnectedLine)
	id, err := a.Conn().GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.emb.server().DisconnectClientByID(id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's warning of its dropped connection", func() bool { return recs["a"].count(slog.LevelWarn, disconnectedLine) == warned+1 })
}
