package events

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/natstest"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// Tokens of the tests' daemons, as serve's --api-tokens would give them.
const (
	readToken    = "read-token-0123456789abcdef"
	operateToken = "operate-token-0123456789abcdef"
	adminToken   = "admin-token-0123456789abcdef"
	scopedToken  = "scoped-token-0123456789abcdef"
)

// testTokens is a token set a test may change, as a SIGHUP's reload does.
type testTokens struct {
	mu sync.Mutex
	by map[string]ClientToken
}

func newTestTokens() *testTokens {
	return &testTokens{by: map[string]ClientToken{
		readToken:    {Name: "reader", Role: "read"},
		operateToken: {Name: "operator", Role: "operate"},
		adminToken:   {Name: "admin", Role: "admin"},
		scopedToken:  {Name: "Alpha depositor", Role: "operate", Scoped: true},
	}}
}

func (tt *testTokens) lookup(token string) (ClientToken, bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	c, ok := tt.by[token]
	return c, ok
}

func (tt *testTokens) set(token string, c *ClientToken) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if c == nil {
		delete(tt.by, token)
		return
	}
	tt.by[token] = *c
}

// connectWith connects to url presenting opts, closed when the test ends;
// a token's client takes its replies under the token's InboxPrefix, unless
// opts give another.
func connectWith(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	var given nats.Options
	for _, opt := range opts {
		_ = opt(&given)
	}
	if given.Token != "" {
		opts = append([]nats.Option{nats.CustomInboxPrefix(InboxPrefix(given.Token))}, opts...)
	}
	nc, err := nats.Connect(url, append(opts, nats.Timeout(5*time.Second), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// With client tokens the embedded server's listener admits only a client
// presenting an unscoped one: none, an unknown one and a scoped one are
// refused, each said once in the daemon's log. A read token replays and
// follows, but a forged event it publishes is refused: never recorded nor
// relayed to the bus's own subscribers (the API's event stream). An
// operate token's event is recorded. No role deletes, purges, updates or
// creates a stream. The bus itself records as before.
func TestClientTokensOnTheListener(t *testing.T) {
	t.Parallel()
	tokens := newTestTokens()
	bus, rec := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: tokens.lookup})
	url := bus.ClientURL()
	bus.Publish(Event{Kind: KindJob, JobID: "jid0000000001", To: "Pending"})
	flush(t, bus)

	for name, opts := range map[string][]nats.Option{
		"no token":     nil,
		"a wrong one":  {nats.Token("wrong-token-0123456789abcdef")},
		"a scoped one": {nats.Token(scopedToken)},
		"a user":       {nats.UserInfo(busUser, "guess")},
	} {
		if _, err := connectWith(t, url, opts...); !AuthRefused(err) {
			t.Errorf("a client with %s: %v, want refused", name, err)
		}
	}
	for _, want := range []string{"it presented no token", "none of this daemon's API tokens",
		"the token of Alpha depositor is scoped to profiles: NATS carries the whole queue's events"} {
		if rec.containing(want) != 1 {
			t.Errorf("the log says %q %d times, want once", want, rec.containing(want))
		}
	}

	reader, err := connectWith(t, url, nats.Token(readToken))
	if err != nil {
		t.Fatalf("a read token: %v", err)
	}
	if got := replay(t, reader, Filter{}); len(got) != 1 || got[0].JobID != "jid0000000001" {
		t.Fatalf("a read token's replay: %+v, want the one event", got)
	}
	if got := replay(t, reader, Filter{JobID: "jid0000000001"}); len(got) != 1 {
		t.Fatalf("a read token's replay of the job (a consumer of each of its subjects): %+v, want the one event", got)
	}
	followed := follow(t, reader, Filter{Since: time.Now().Add(-time.Hour)})
	if e := receive(t, followed, "the recorded event, followed"); e.JobID != "jid0000000001" {
		t.Fatalf("followed %+v first, want the recorded event", e)
	}
	relayed := make(chan *nats.Msg, 10)
	sub, err := bus.Conn().ChanSubscribe(SubjectAll, relayed)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := bus.Conn().Flush(); err != nil {
		t.Fatal(err)
	}

	forged, _ := json.Marshal(Event{ID: "forged", Time: time.Now(), Kind: KindJob, JobID: "jid0000000002", To: "Completed"})
	if err := reader.Publish("ingestq.job.completed.jid0000000002", forged); err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := reader.LastError(); !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("a read token's forged event: %v, want a permissions violation", err)
	}
	// nats-server's line knows the client by its ID only; the log names the holder.
	if got := rec.attrValues("Publish Violation - Subject", "token"); !slices.Equal(got, []string{"reader"}) {
		t.Errorf("nats-server's line of the forged event names the token %q, want [reader]", got)
	}
	bus.Publish(Event{Kind: KindJob, JobID: "jid0000000003", To: "Pending"})
	flush(t, bus)
	if m := receive(t, relayed, "the bus's next event"); strings.Contains(string(m.Data), "forged") {
		t.Fatalf("the forged event reached the bus's subscribers: %s", m.Data)
	}
	if e := receive(t, followed, "the bus's next event, followed"); e.JobID != "jid0000000003" {
		t.Fatalf("the read token followed %+v, want the bus's next event", e)
	}

	operator, err := connectWith(t, url, nats.Token(operateToken))
	if err != nil {
		t.Fatalf("an operate token: %v", err)
	}
	js, _ := jetstream.New(operator)
	action, _ := json.Marshal(Event{ID: "action", Time: time.Now(), Kind: KindAdmin, Actor: "operator"})
	if _, err := js.Publish(t.Context(), "ingestq.admin.hold", action, jetstream.WithMsgID("action")); err != nil {
		t.Fatalf("an operate token's action: %v", err)
	}
	ids := []string{}
	for _, e := range replay(t, bus.Conn(), Filter{}) {
		ids = append(ids, e.ID)
	}
	if strings.Contains(strings.Join(ids, " "), "forged") || !strings.Contains(strings.Join(ids, " "), "action") {
		t.Fatalf("the stream records %v: want the operate token's action, not the read token's forged event", ids)
	}

	for _, token := range []string{readToken, operateToken, adminToken} {
		nc, err := connectWith(t, url, nats.Token(token))
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		tryStream(t, token, "delete", func(ctx context.Context) error { return js.DeleteStream(ctx, DefaultStream) })
		tryStream(t, token, "purge", func(ctx context.Context) error {
			s, err := js.Stream(ctx, DefaultStream)
			if err == nil {
				err = s.Purge(ctx)
			}
			return err
		})
		tryStream(t, token, "update", func(ctx context.Context) error {
			_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: DefaultStream, Subjects: []string{SubjectAll}, MaxMsgs: 1})
			return err
		})
		tryStream(t, token, "create", func(ctx context.Context) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}})
			return err
		})
	}
	if got := replay(t, bus.Conn(), Filter{}); len(got) != 3 {
		t.Fatalf("after every role tried to delete and purge it, the stream holds %d events, want 3", len(got))
	}
}

// follow runs a Follower of f on nc until the test ends: the events it
// delivers.
func follow(t *testing.T, nc *nats.Conn, f Filter) <-chan Event {
	t.Helper()
	fl, err := NewFollower(nc, f)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	followed := make(chan Event, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fl.Run(ctx, "", func(e Event) error {
			select {
			case followed <- e:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done; fl.Close() })
	return followed
}

// tryStream runs a stream management call of token's client, which must fail.
func tryStream(t *testing.T, token, what string, call func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := call(ctx); err == nil {
		t.Errorf("%s: stream %s allowed", token, what)
	}
}

// A reload of the tokens (ClientTokensChanged) disconnects the clients
// whose token was revoked or given another role, and says so: the revoked
// one is refused again, the other comes back with its new role's
// permissions; the unchanged one stays connected. So too when a reload of
// the server's options (a route change, a routes' CA change) comes between
// the tokens' reload and its recheck: it leaves the clients as they were
// admitted, for the recheck. Before, that reload registered the changed
// token's new role in place, and the recheck, finding the new holder
// already kept, left the client connected and said nothing.
func TestClientTokensChangedDisconnects(t *testing.T) {
	t.Parallel()
	for _, optionsReload := range []bool{false, true} {
		t.Run(fmt.Sprintf("options reloaded between=%v", optionsReload), func(t *testing.T) {
			t.Parallel()
			tokens := newTestTokens()
			bus, rec := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: tokens.lookup})
			lost := map[string]chan struct{}{}
			conns := map[string]*nats.Conn{}
			for _, token := range []string{readToken, operateToken, adminToken} {
				ch := make(chan struct{}, 1)
				lost[token] = ch
				nc, err := connectWith(t, bus.ClientURL(), nats.Token(token), nats.ReconnectWait(10*time.Millisecond),
					nats.DisconnectErrHandler(func(*nats.Conn, error) { ch <- struct{}{} }))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := nc.SubscribeSync(SubjectAll); err != nil {
					t.Fatal(err)
				}
				conns[token] = nc
			}
			tokens.set(readToken, nil)                                             // revoked
			tokens.set(operateToken, &ClientToken{Name: "operator", Role: "read"}) // another role
			if optionsReload {
				if err := bus.reload(nil); err != nil {
					t.Fatal(err)
				}
				nc := conns[operateToken]
				if err := nc.Flush(); err != nil || len(lost[operateToken]) > 0 {
					t.Fatalf("the changed token's client after the options' reload: flush %v, lost %d times; want kept until the recheck",
						err, len(lost[operateToken]))
				}
			}
			bus.ClientTokensChanged()
			receive(t, lost[readToken], "the revoked token's connection lost")
			waitFor(t, "the revoked token refused again", func() bool { return conns[readToken].IsClosed() })
			if err := conns[readToken].LastError(); !AuthRefused(err) {
				t.Errorf("the revoked token reconnecting: %v, want refused", err)
			}
			receive(t, lost[operateToken], "the operate token made read: its connection lost")
			said := rec.attrValues("events: disconnected a NATS client: its token was revoked or changed", "token")
			if slices.Sort(said); !slices.Equal(said, []string{"operator", "reader"}) {
				t.Errorf("the recheck said it disconnected the clients of %q, want [operator reader]", said)
			}
			waitFor(t, "the token made read back", func() bool { return conns[operateToken].IsConnected() })
			nc := conns[operateToken]
			if err := nc.Publish("ingestq.admin.hold", []byte("{}")); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil || !errors.Is(nc.LastError(), nats.ErrPermissionViolation) {
				t.Errorf("the token made read publishes: flush %v, last error %v; want a permissions violation", err, nc.LastError())
			}
			if err := conns[adminToken].Flush(); err != nil || len(lost[adminToken]) > 0 {
				t.Errorf("the unchanged admin token's connection: %v, lost %d times", err, len(lost[adminToken]))
			}
		})
	}
}

// The clients admitted by a token are forgotten once gone (at the
// pruneFirst-th admission), and the one connected is still known by its
// client ID, with its holder (the server's lines name it so).
func TestAdmittedClientsPruned(t *testing.T) {
	t.Parallel()
	tokens := newTestTokens()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: tokens.lookup})
	ns, clients := bus.emb.server(), bus.cfg.clients
	var gone []uint64
	for range pruneFirst {
		nc, err := connectWith(t, bus.ClientURL(), nats.Token(readToken))
		if err != nil {
			t.Fatal(err)
		}
		cid, err := nc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		gone = append(gone, cid)
		nc.Close()
	}
	waitFor(t, "the clients closed gone from the server", func() bool { return len(openClients(ns)) <= 1 }) // the bus's own
	nc, err := connectWith(t, bus.ClientURL(), nats.Token(operateToken))
	if err != nil {
		t.Fatal(err)
	}
	cid, err := nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	clients.mu.Lock()
	count := clients.count
	clients.mu.Unlock()
	if holder, ok := clients.holderOf(ns, cid); count != 1 || !ok || holder.Name != "operator" {
		t.Errorf("after %d clients gone and one connected: %d kept, the one connected held by %+v (known: %v); want 1, operator",
			pruneFirst, count, holder, ok)
	}
	for _, cid := range gone {
		if holder, ok := clients.holderOf(ns, cid); ok {
			t.Fatalf("a client gone is still kept: cid %d, %+v", cid, holder)
		}
	}
}

// Without client tokens the listener is as it was: any client, with or
// without a token, publishes and its event is recorded.
func TestNoClientTokensListenerOpen(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0"})
	for _, opts := range [][]nats.Option{nil, {nats.Token("any-token")}} {
		nc, err := connectWith(t, bus.ClientURL(), opts...)
		if err != nil {
			t.Fatalf("a client without client tokens configured: %v", err)
		}
		js, _ := jetstream.New(nc)
		data, _ := json.Marshal(Event{ID: nats.NewInbox(), Time: time.Now(), Kind: KindJob, JobID: "jid0000000001"})
		if _, err := js.Publish(t.Context(), "ingestq.job.pending.jid0000000001", data); err != nil {
			t.Fatalf("a client's event: %v", err)
		}
	}
	if got := replay(t, bus.Conn(), Filter{}); len(got) != 2 {
		t.Fatalf("the stream holds %d events, want 2", len(got))
	}
}

// A cluster member with client tokens is the same: no token refused, a
// read token replays but may not publish, before and after its routes
// change (a ReloadOptions, which checks every client again); the system
// account still answers ForgetHost, and the events the members publish
// are recorded in the cluster's one stream.
func TestClientTokensOnAClusterMember(t *testing.T) {
	t.Parallel()
	tokens := newTestTokens()
	ms := openClusterWith(t, func(c *Config) { c.ClientTokens = tokens.lookup }, "a", "b")
	publishN(t, ms[1], "bid-1", 2)
	if _, err := connectWith(t, ms[0].ClientURL()); !AuthRefused(err) {
		t.Errorf("a member's client without a token: %v, want refused", err)
	}
	reader, err := connectWith(t, ms[0].ClientURL(), nats.Token(readToken))
	if err != nil {
		t.Fatalf("a read token: %v", err)
	}
	deniedPublish := func(when string) {
		t.Helper()
		if err := reader.Publish("ingestq.job.completed.jid-forged", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if err := reader.Flush(); err != nil || !errors.Is(reader.LastError(), nats.ErrPermissionViolation) {
			t.Errorf("%s: a read token's publish: flush %v, last error %v; want a permissions violation", when, err, reader.LastError())
		}
	}
	deniedPublish("two members")
	c := openMemberWith(t, "c", func(c *Config) { c.ClientTokens = tokens.lookup }, ms...)
	for _, m := range ms {
		m.SetRoutes(routesOf(append(others(ms, m), c)))
	}
	publishN(t, c, "bid-2", 1)
	if got := replay(t, reader, Filter{}); len(got) != 3 || !reader.IsConnected() {
		t.Fatalf("after the routes changed the read token replays %d events (connected: %v), want 3", len(got), reader.IsConnected())
	}
	deniedPublish("three members")
	wantForgetAnswers(t, ms[0])
}

// A daemon joined with --nats to another's embedded server, with a token
// of it, may not manage the stream there: its start fails at once, saying
// so, rather than after a minute of "JetStream does not answer".
func TestJoinedDaemonMayNotManageAnEmbeddedStream(t *testing.T) {
	t.Parallel()
	tokens := newTestTokens()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: tokens.lookup})
	started := time.Now()
	_, err := Open(t.Context(), Config{URL: bus.ClientURL(), Token: adminToken, Host: "joined", Logger: discardLogger()})
	if err == nil || !strings.Contains(err.Error(), "does not let this daemon manage stream") || !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("a daemon joined to another's embedded server: %v, want refused", err)
	}
	if took := time.Since(started); took > setupTry+5*time.Second {
		t.Errorf("the refusal took %v, want one try (%v) at most", took, setupTry)
	}
}

// A client's push consumer (which would have the server deliver the stream
// to any subject, here the bus's own signals) and its durable one are
// deleted as soon as they are made, and said; its ordered consumers, as
// replay makes, stay until done.
func TestClientConsumersAreOrderedPullOnly(t *testing.T) {
	t.Parallel()
	tokens := newTestTokens()
	bus, rec := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: tokens.lookup})
	bus.Publish(Event{Kind: KindJob, JobID: "jid0000000001", To: "Pending"})
	flush(t, bus)
	reader, err := connectWith(t, bus.ClientURL(), nats.Token(readToken))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(reader)
	signal := SignalSubject("test-host", "jobs")
	for name, cfg := range map[string]jetstream.ConsumerConfig{
		"push":    {Name: "push", DeliverSubject: signal},
		"durable": {Durable: "durable"},
	} {
		if _, err := js.CreateOrUpdateConsumer(t.Context(), DefaultStream, cfg); err != nil {
			t.Fatalf("the %s consumer: %v", name, err)
		}
	}
	waitFor(t, "both deletions said", func() bool {
		return rec.containing("events: deleted a consumer a NATS client made on the stream") == 2
	})
	s, err := js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(t.Context()); err != nil || info.State.Consumers != 0 {
		t.Errorf("the stream has %d consumers left (%v), want none", info.State.Consumers, err)
	}
	if got := replay(t, reader, Filter{}); len(got) != 1 {
		t.Errorf("a replay after: %d events, want 1", len(got))
	}
}

// With a TLS listener (Config.ListenTLS) the token travels inside TLS, and
// the two go together: a client with the CA and a read token replays, one
// with the CA and no token is refused.
func TestClientTokensOverATLSListener(t *testing.T) {
	t.Parallel()
	cert, key, pool := tlstest.SelfSigned(t)
	listenTLS, _, err := LoadListenTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0", ListenTLS: listenTLS, ClientTokens: newTestTokens().lookup})
	bus.Publish(Event{Kind: KindJob, JobID: "jid0000000001", To: "Pending"})
	flush(t, bus)
	trust := nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if _, err := connectWith(t, bus.ClientURL(), trust); !AuthRefused(err) {
		t.Errorf("a TLS client without a token: %v, want refused", err)
	}
	reader, err := connectWith(t, bus.ClientURL(), trust, nats.Token(readToken))
	if err != nil {
		t.Fatalf("a TLS client with a read token: %v", err)
	}
	if got := replay(t, reader, Filter{}); len(got) != 1 {
		t.Errorf("it replays %d events, want 1", len(got))
	}
}

// The daemon's internal users are its own in-process connections': a
// read token, which sees every event's ID (a nuid of the daemon's), may
// not derive their passwords from those IDs, and a client on the listener
// presenting one of them, even with its password, is refused, with or
// without client tokens; the daemon's own connections (its bus,
// ForgetHost) still work.
func TestInternalUsersOnlyInProcess(t *testing.T) {
	t.Parallel()
	bus, _, _, ids := recordedAndSeen(t, readToken)
	for user, password := range map[string]string{busUser: busPassword, systemUser: systemPassword} {
		if onNuidSequence(ids, password) {
			t.Errorf("the password of %s follows the event IDs a read token sees (%v): derivable", user, ids)
		}
	}
	if nc, err := connectWith(t, bus.ClientURL(), nats.UserInfo(busUser, busPassword)); !AuthRefused(err) {
		js, _ := jetstream.New(nc)
		tryStream(t, busUser, "purge", func(ctx context.Context) error {
			s, err := js.Stream(ctx, DefaultStream)
			if err == nil {
				err = s.Purge(ctx)
			}
			return err
		})
		t.Errorf("a client on the listener presenting %s and its password: %v, want refused", busUser, err)
	}
	if got := replay(t, bus.Conn(), Filter{}); len(got) != 5 {
		t.Errorf("the stream holds %d events, want 5", len(got))
	}

	ms := openCluster(t, "a", "b")
	if nc, err := connectWith(t, ms[0].ClientURL(), nats.UserInfo(systemUser, systemPassword)); !AuthRefused(err) {
		t.Errorf("a client on a member's listener without client tokens presenting %s and its password: %v (connected %v), "+
			"want refused", systemUser, err, nc != nil && nc.IsConnected())
	}
	wantForgetAnswers(t, ms[0])
}

// The internal users' passwords, presented as tokens since decision 959,
// still make only this process's own connections the daemon's. A client
// on the listener presenting either as its token is refused where there
// are client tokens (a lone server's listener, a member's); without them
// it is let in as any client is, into the global account, never into the
// system account, which an in-process connection presenting the system
// password enters (ForgetHost).
func TestInternalTokensOnlyInProcess(t *testing.T) {
	t.Parallel()
	withTokens := func(cfg *Config) { cfg.ClientTokens = newTestTokens().lookup }
	lone, _ := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: newTestTokens().lookup})
	guarded := openClusterWith(t, withTokens, "a", "b")
	open := openCluster(t, "c", "d")
	for what, password := range map[string]string{"the bus's password": busPassword, "the system user's password": systemPassword} {
		for where, url := range map[string]string{"a lone server with client tokens": lone.ClientURL(),
			"a member with client tokens": guarded[0].ClientURL()} {
			if nc, err := connectWith(t, url, nats.Token(password)); !AuthRefused(err) {
				t.Errorf("a client on %s presenting %s as its token: %v (connected %v), want refused", where, what, err,
					nc != nil && nc.IsConnected())
			}
		}
		nc, err := connectWith(t, open[0].ClientURL(), nats.Token(password))
		if err != nil {
			t.Errorf("a client on a member's listener without client tokens presenting %s as its token: %v, want it let in",
				what, err)
			continue
		}
		if acc := accountOf(t, nc); acc != "$G" {
			t.Errorf("a client on a member's listener presenting %s as its token is in account %q, want the global one, $G", what, acc)
		}
	}
	inside, err := nats.Connect("", nats.InProcessServer(open[0].emb), asSystem())
	if err != nil {
		t.Fatal(err)
	}
	defer inside.Close()
	if acc := accountOf(t, inside); acc != "$SYS" {
		t.Errorf("the in-process system connection is in account %q, want $SYS", acc)
	}
	wantForgetAnswers(t, open[0])
}

// accountOf is the account nc's server puts it in ($SYS.REQ.USER.INFO,
// which nats-server answers in every account).
func accountOf(t *testing.T, nc *nats.Conn) string {
	t.Helper()
	m, err := nc.Request("$SYS.REQ.USER.INFO", nil, 5*time.Second)
	if err != nil {
		t.Fatalf("$SYS.REQ.USER.INFO: %v", err)
	}
	var resp struct {
		Data struct {
			Account string `json:"account"`
		} `json:"data"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		t.Fatalf("$SYS.REQ.USER.INFO: %v: %s", err, m.Data)
	}
	return resp.Data.Account
}

// recordedAndSeen is a bus with client tokens that has recorded 5 events,
// a client of token on its listener, and the events' IDs that client
// replays.
func recordedAndSeen(t *testing.T, token string) (*Bus, *logRecorder, *nats.Conn, []string) {
	t.Helper()
	bus, rec := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: newTestTokens().lookup})
	for range 5 {
		bus.Publish(Event{Kind: KindJob, JobID: "jid0000000001", To: "Pending"})
	}
	flush(t, bus)
	nc, err := connectWith(t, bus.ClientURL(), nats.Token(token))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range replay(t, nc, Filter{}) {
		ids = append(ids, e.ID)
	}
	return bus, rec, nc, ids
}

// onNuidSequence tells whether password is a nuid of the same generator as
// ids, before them: the same prefix, and its sequence a whole number of
// the generator's increment behind theirs, as whoever reads the ids can
// enumerate.
func onNuidSequence(ids []string, password string) bool {
	step := natstest.NuidStep(ids)
	if len(password) != 22 || step == 0 || ids[0][:12] != password[:12] {
		return false
	}
	behind := natstest.NuidSeq(ids[0]) - natstest.NuidSeq(password)
	return behind > 0 && behind%step == 0
}

// A client reading its whole inbox space (every role may, for its own
// replies) sees none of the daemon's own: not its publishes' acks, not the events
// pulled for its followers (the API's event stream), whose reply subjects
// name its consumers, which a read token could then delete or pull from.
func TestBusRepliesHiddenFromClients(t *testing.T) {
	t.Parallel()
	bus, _ := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: newTestTokens().lookup})
	reader, err := connectWith(t, bus.ClientURL(), nats.Token(readToken))
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := reader.SubscribeSync(InboxPrefix(readToken) + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	bus.Publish(Event{Kind: KindJob, JobID: "jid0000000001", To: "Pending"})
	flush(t, bus)
	followed := follow(t, bus.Conn(), Filter{Since: time.Now().Add(-time.Hour)})
	receive(t, followed, "the recorded event, replayed on the bus's connection")

	// The reader's own request last: its reply comes after whatever the
	// server sent it before.
	js, _ := jetstream.New(reader)
	if _, err := js.Stream(t.Context(), DefaultStream); err != nil {
		t.Fatal(err)
	}
	own := reader.NewRespInbox()
	own = own[:strings.LastIndexByte(own, '.')+1]
	for {
		m, err := inbox.NextMsg(testTimeout)
		if err != nil {
			t.Fatalf("the reader's own reply: %v", err)
		}
		if strings.HasPrefix(m.Subject, own) {
			break
		}
		t.Errorf("a read token saw the daemon's reply on %s (reply subject %q): %.80s", m.Subject, m.Reply, m.Data)
	}
}

// An operate token may record actions, not suppress the daemon's events:
// from the IDs a replay shows it may not foresee the next ones, so the
// events it publishes with those IDs (Nats-Msg-Id, the stream's duplicate
// window) leave the daemon's next event recorded.
func TestEventIDsForeseenByNoClient(t *testing.T) {
	t.Parallel()
	bus, _, operator, ids := recordedAndSeen(t, operateToken)
	if step := natstest.NuidStep(ids); step != 0 {
		js, _ := jetstream.New(operator)
		last := natstest.NuidSeq(ids[len(ids)-1])
		for k := range int64(2000) {
			id := natstest.NuidAt(ids[0], last+(k+1)*step)
			data, _ := json.Marshal(Event{ID: id, Time: time.Now(), Kind: KindAdmin, Actor: "operator"})
			if _, err := js.PublishAsync("ingestq.admin.hold", data, jetstream.WithMsgID(id)); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(testTimeout):
			t.Fatal("the operate token's events not acknowledged")
		}
	}
	bus.Publish(Event{Kind: KindJob, JobID: "jid0000000002", To: "Pending"})
	flush(t, bus)
	if got := replay(t, bus.Conn(), Filter{JobID: "jid0000000002"}); len(got) != 1 {
		t.Errorf("the daemon's event after an operate token published the IDs foreseen from %v: recorded %d times, want once", ids, len(got))
	}
}

// A client's push consumer delivers the stream as soon as it is made,
// before the daemon deletes it: onto the daemon's own signals (here its
// "probe" signal) it delivers nothing the daemon takes for a signal.
func TestPushConsumerDeliversNoSignal(t *testing.T) {
	t.Parallel()
	bus, rec, reader, _ := recordedAndSeen(t, readToken)
	signals := make(chan string, 100)
	unsubscribe, err := bus.SubscribeSignal("probe", func(data []byte) { signals <- string(data) })
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	js, _ := jetstream.New(reader)
	if _, err := js.CreateOrUpdateConsumer(t.Context(), DefaultStream, jetstream.ConsumerConfig{
		Name: "push", DeliverSubject: SignalSubject("test-host", "probe")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion said", func() bool {
		return rec.containing("events: deleted a consumer a NATS client made on the stream") == 1
	})
	bus.Signal("probe", []byte("real"))
	if got := receive(t, signals, "the bus's own signal"); got != "real" {
		t.Errorf("the bus's signal subscriber got %.80s first, want its own signal", got)
	}
}

// A client's pull consumer that would outlive its reader (an inactive
// threshold of a year: a durable in all but name) is deleted as the
// durable is; the marker after it, a push consumer, is judged after it
// (the advisories come in order), so a deletion said means it was judged.
func TestLongLivedClientConsumerDeleted(t *testing.T) {
	t.Parallel()
	_, rec, reader, _ := recordedAndSeen(t, readToken)
	js, _ := jetstream.New(reader)
	for _, cfg := range []jetstream.ConsumerConfig{
		{Name: "a-year", InactiveThreshold: 365 * 24 * time.Hour},
		{Name: "marker", DeliverSubject: "marker"},
	} {
		if _, err := js.CreateOrUpdateConsumer(t.Context(), DefaultStream, cfg); err != nil {
			t.Fatalf("the consumer %s: %v", cfg.Name, err)
		}
	}
	waitFor(t, "a deletion said", func() bool { return rec.containing("events: deleted a consumer a NATS client made") > 0 })
	if _, err := js.Consumer(t.Context(), DefaultStream, "a-year"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("the consumer idle a year: %v, want deleted", err)
	}
}

// Each token's client has an inbox space of its own (InboxPrefix): two
// read tokens each replay and follow under their own prefix, and neither
// may subscribe to the other's space nor to _INBOX.>, so neither sees the
// other's replies (its ordered consumers' deliveries, its JetStream API
// answers). A client taking its replies under _INBOX is refused them. A
// push consumer aimed at another's space delivers nothing to the inbox
// that client listens on (the subject is not one the aimer can learn),
// and is deleted.
func TestClientInboxesArePrivate(t *testing.T) {
	t.Parallel()
	const otherReadToken = "other-read-token-0123456789abcdef"
	tokens := newTestTokens()
	tokens.set(otherReadToken, &ClientToken{Name: "other reader", Role: "read"})
	bus, rec := openBus(t, Config{Listen: "127.0.0.1:0", ClientTokens: tokens.lookup})
	bus.Publish(Event{Kind: KindJob, JobID: "jid0000000001", To: "Pending"})
	flush(t, bus)
	url := bus.ClientURL()
	spy, err := connectWith(t, url, nats.Token(readToken))
	if err != nil {
		t.Fatal(err)
	}
	other, err := connectWith(t, url, nats.Token(otherReadToken))
	if err != nil {
		t.Fatal(err)
	}
	if InboxPrefix(readToken) == InboxPrefix(otherReadToken) || !strings.HasPrefix(InboxPrefix(readToken), "_INBOX_") {
		t.Fatalf("inbox prefixes %q and %q: want two, each _INBOX_…", InboxPrefix(readToken), InboxPrefix(otherReadToken))
	}

	seen := make(chan *nats.Msg, 1000)
	for _, subject := range []string{nats.InboxPrefix + ">", InboxPrefix(otherReadToken) + ".>"} {
		if _, err := spy.ChanSubscribe(subject, seen); err != nil {
			t.Fatal(err)
		}
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := spy.LastError(); !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
			t.Errorf("a read token subscribing to %s: %v, want a permissions violation", subject, err)
		}
	}
	for name, nc := range map[string]*nats.Conn{"the spy": spy, "the other": other} {
		if got := replay(t, nc, Filter{}); len(got) != 1 || got[0].JobID != "jid0000000001" {
			t.Fatalf("%s's replay: %+v, want the one event", name, got)
		}
		if e := receive(t, follow(t, nc, Filter{Since: time.Now().Add(-time.Hour)}), name+" follows"); e.JobID != "jid0000000001" {
			t.Fatalf("%s followed %+v, want the recorded event", name, e)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(seen) > 0 {
		t.Fatalf("the spy's subscriptions saw %d replies, the first on %s", len(seen), (<-seen).Subject)
	}

	unprefixed, err := connectWith(t, url, nats.Token(otherReadToken), nats.CustomInboxPrefix(nats.InboxPrefix[:len(nats.InboxPrefix)-1]))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := Replay(ctx, unprefixed, "", Filter{}, func(Event) error { return nil }); err == nil ||
		!errors.Is(unprefixed.LastError(), nats.ErrPermissionViolation) || !strings.Contains(unprefixed.LastError().Error(), "Subscription") {
		t.Errorf("a replay under _INBOX: %v (last error %v), want refused its replies' subscription", err, unprefixed.LastError())
	}
	if got := rec.attrValues("events: a NATS client may not read replies there: a token's client takes them under the token's own inbox prefix", "token"); !slices.Equal(got, []string{"reader", "other reader"}) {
		t.Errorf("the inboxes refused are said of the tokens %q, want once per token, naming its holder: [reader, other reader]", got)
	}

	listening, err := other.SubscribeSync(other.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(spy)
	for i, aim := range []string{InboxPrefix(otherReadToken) + ".x", nats.InboxPrefix + "x"} {
		if _, err := js.CreateOrUpdateConsumer(t.Context(), DefaultStream, jetstream.ConsumerConfig{Name: fmt.Sprint("aimed", i), DeliverSubject: aim}); err != nil {
			t.Fatalf("the push consumer aimed at %s: %v", aim, err)
		}
	}
	waitFor(t, "both deletions said", func() bool {
		return rec.containing("events: deleted a consumer a NATS client made on the stream") == 2
	})
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := listening.NextMsg(0); err == nil {
		t.Errorf("a push consumer of the spy delivered onto the other's inbox %s: %s", m.Subject, m.Data)
	}
}

// A consumer a client makes while the bus's connection is away (its
// advisory unheard) is found when the bus reconnects, and deleted.
func TestClientConsumerMadeWhileTheBusReconnectsDeleted(t *testing.T) {
	t.Parallel()
	bus, rec, reader, _ := recordedAndSeen(t, readToken)
	js, _ := jetstream.New(reader)
	cid, err := bus.Conn().GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	// The bus reconnects through emb's InProcessConn, which waits for the
	// lock: the consumer is made while it is away.
	bus.emb.mu.Lock()
	err = bus.emb.ns.DisconnectClientByID(cid)
	if err == nil {
		_, err = js.CreateOrUpdateConsumer(t.Context(), DefaultStream, jetstream.ConsumerConfig{Durable: "while-away"})
	}
	bus.emb.mu.Unlock()
	if err != nil {
		t.Fatalf("the durable consumer made while the bus is away: %v", err)
	}
	const deleted = "events: deleted a consumer a NATS client made on the stream: clients read it through ordered pull consumers only (events replay and tail)"
	waitFor(t, "the deletion said", func() bool { return rec.containing(deleted) > 0 })
	if got := rec.attrs(deleted)["durable"]; got != "while-away" {
		t.Errorf("the deletion said is of %q, want while-away", got)
	}
	if _, err := js.Consumer(t.Context(), DefaultStream, "while-away"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("the consumer made while the bus was away: %v, want deleted", err)
	}
}
