package events

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The daemon's internal users, of its own in-process connections, each
// with a password only this process knows, presented as the connection's
// token; clientAuth refuses their names on the listener (a lone server
// without client tokens checks no one). busUser is the user of the bus's
// connections to its embedded server (and of one reading a store recorded
// alone): with client tokens the listener admits nothing else with full
// rights. systemUser, of a cluster member's system account, asks the
// JetStream meta leader to forget a server (ForgetHost).
//
// They present no user name: at every ReloadOptions (a route change, a
// routes' CA change) nats-server closes each client whose user name is not
// in its own user list, which under a custom authentication is empty. A
// token's client is registered without a name for the same reason; its
// holder is found by its client ID (tokenClients.holderOf).
const (
	busUser    = "ingestq-bus"
	systemUser = "ingestq-system"
)

// The internal users' passwords are crypto/rand's: a nuid's prefix is
// shared by every nuid.Next() of the process and its sequence steps by a
// small increment, so the event IDs (nuids) that any reader sees gave the
// passwords away.
var busPassword, systemPassword = rand.Text(), rand.Text()

// busInboxPrefix starts the replies to this process's in-process
// connections, outside every client's inbox space: the bus's acks,
// and the events pulled for its followers, whose reply subjects name its
// consumers (which a client could then delete or pull from).
const busInboxPrefix = "_ingestq_inbox"

// asBus is the option that makes an in-process connection the bus user's.
func asBus() nats.Option {
	return func(o *nats.Options) error {
		o.Token = busPassword
		return nats.CustomInboxPrefix(busInboxPrefix)(o)
	}
}

// InboxPrefix is where a client presenting token on a listener with client
// tokens takes its replies (nats.CustomInboxPrefix, the nats CLI's
// --inbox-prefix): the only inboxes it may subscribe to, and no other
// token's client may. It is derived from the token, so a subscriber
// computes it (`ingestq events inbox-prefix` prints it), and another
// client names it only if it knows the token or its SHA-256.
func InboxPrefix(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "_INBOX_" + hex.EncodeToString(sum[:8])
}

// inboxRefused is nats-server's line for a client refused a subscription
// under _INBOX: the subject. Its client is named by clientLine.
var inboxRefused = regexp.MustCompile(` - Subscription Violation - Subject "(_INBOX[^"]*)"`)

// clientLine is the start of nats-server's lines about a client on the
// listener: its address and client ID (cid), which tokenClients knows the
// holder of. What follows (the client's name, version) is the client's
// own words.
var clientLine = regexp.MustCompile(`^\S+ - cid:(\d+)\b`)

// tokenHolder is the name of the holder of the token the client of
// nats-server's line presented, if the line is about a token's client.
func (l serverLogger) tokenHolder(line string) (string, bool) {
	if l.holderOf == nil {
		return "", false
	}
	m := clientLine.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	cid, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return "", false
	}
	holder, ok := l.holderOf(cid)
	return holder.Name, ok
}

// inboxRefusedLine says once per token, when nats-server's line is of a
// token's client refused an inbox, which one a client of that token may
// read: the daemon's words for a third party's client that takes its
// replies under nats.go's _INBOX (its requests then go unanswered). inbox
// tells whether the line is of one.
func (l serverLogger) inboxRefusedLine(line string) (msg string, attrs []any, inbox bool) {
	m := inboxRefused.FindStringSubmatch(line)
	if m == nil {
		return "", nil, false
	}
	name, ok := l.tokenHolder(line)
	if !ok || !l.said.first("inbox of "+name) {
		return "", nil, true
	}
	return "events: a NATS client may not read replies there: a token's client takes them under the token's own inbox prefix, " +
		"_INBOX_ and the first 16 hex digits of the token's SHA-256 (nats.CustomInboxPrefix in nats.go, the nats CLI's " +
		"--inbox-prefix; ingestq events inbox-prefix prints it) (said once per token)", []any{"token", name, "subject", m[1]}, true
}

// asSystem is the option that makes an in-process connection the system user's.
func asSystem() nats.Option { return nats.Token(systemPassword) }

// inProcess tells whether c is a connection of this process (InProcessConn's
// pipe), never one on the listener.
func inProcess(c server.ClientAuthentication) bool {
	addr := c.RemoteAddress()
	return addr != nil && addr.Network() == "pipe"
}

// ClientToken is who holds a token presented on the embedded server's
// client listener (Config.ClientTokens): Name for the log, Role read,
// operate or admin, Scoped when it is limited to some profiles' work.
type ClientToken struct {
	Name, Role string
	Scoped     bool
}

// tokenClients are the clients an embedded server admitted by their token,
// kept while they may be connected so that a reload of the tokens
// (Bus.ClientTokensChanged) disconnects those whose token went or changed,
// and the server's lines about one name its holder (holderOf). It outlives
// the servers a bus replaces; each server's clients are told apart by the
// server.
type tokenClients struct {
	lookup func(token string) (ClientToken, bool)
	stream string
	log    *slog.Logger

	// mu orders admit and recheck, which call into nats-server (Connz)
	// holding it. admitted (clientKey → admitted) is also read without
	// it, by holderOf: nats-server logs holding its own locks.
	mu       sync.Mutex
	admitted sync.Map
	count    int // the entries of admitted
	pruneAt  int // prune the gone ones when admitted reaches this many
}

type clientKey struct {
	ns  *server.Server
	cid uint64
}

// admitted is what a client presented, and who it was then; nats-server
// holds the token for the connection's life too.
type admitted struct {
	token  string
	holder ClientToken
}

const pruneFirst = 64

// clientAuth admits the embedded server's clients: this process's own
// users (busUser; systemUser into the system account), and, with client
// tokens, only a client presenting an unscoped one, with its role's
// permissions; without tokens every other client, whatever it presents,
// as a server without authentication does.
type clientAuth struct {
	ns      atomic.Pointer[server.Server]
	clients *tokenClients // nil: no client tokens
	log     *slog.Logger
	said    onceEach
}

// withClientAuth sets the server's client authentication: needed with
// client tokens, or for the system user of a cluster member (set
// SystemAccount first). A lone server without tokens asks nothing, as before.
func withClientAuth(opts *server.Options, cfg Config) {
	if cfg.clients != nil || opts.SystemAccount != "" {
		opts.CustomClientAuthentication = &clientAuth{clients: cfg.clients, log: cfg.Logger}
	}
}

// Check admits c, or refuses it and says why once per address and reason.
func (a *clientAuth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	ns := a.ns.Load()
	switch {
	case ns == nil:
		return false
	case (o.Username == systemUser || o.Username == busUser) && !inProcess(c):
		return a.refuse(c, "it presented the daemon's internal user "+o.Username+", which only the daemon's own in-process "+
			"connections may")
	case inProcess(c) && same(o.Token, systemPassword) && ns.SystemAccount() != nil:
		c.RegisterUser(&server.User{Account: ns.SystemAccount()})
		return true
	case inProcess(c) && same(o.Token, busPassword):
		return true
	case a.clients == nil:
		return true
	case o.Token == "":
		return a.refuse(c, "it presented no token: this daemon has API tokens (serve --api-tokens), and its NATS listener "+
			"admits only a client presenting one of them (--nats-token, INGESTQ_NATS_TOKEN)")
	}
	holder, ok := a.clients.admit(clientKey{ns, c.GetID()}, o.Token)
	switch {
	case !ok:
		return a.refuse(c, "it presented a token that is none of this daemon's API tokens (serve --api-tokens, INGESTQ_ADMIN_TOKEN)")
	case holder.Scoped:
		return a.refuse(c, "the token of "+holder.Name+" is scoped to profiles: NATS carries the whole queue's events, unmasked; "+
			"a depositor reads the API's event stream (GET /api/v1/events), which its scope limits")
	}
	// No user name: nats-server's reload would close the client (see busUser).
	c.RegisterUser(&server.User{Permissions: a.clients.permissions(holder.Role, o.Token)})
	return true
}

// refuse says once per address and reason why c was refused (nats-server's
// own line says neither), and refuses it.
func (a *clientAuth) refuse(c server.ClientAuthentication, why string) bool {
	from := remoteHost(c, "in-process")
	if a.said.first(from + why) {
		a.log.Warn("events: refused a NATS client: "+why+" (said once per address)", "from", from)
	}
	return false
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// permissions are what a client presenting token of role may do: every
// role subscribes to the events and to its own inboxes (InboxPrefix), and
// reads the stream as events replay and tail do (its info, ordered
// consumers, a message from the stream's leader); operate and admin also
// publish events (the CLI records its actions). No client manages the
// stream: the daemon does, as busUser. A consumer's deliver subject is in
// the create request's body, which permissions do not see (guardConsumers);
// the forms of create that are durable by their subject
// ($JS.API.CONSUMER.DURABLE.CREATE.>), or name nothing
// ($JS.API.CONSUMER.CREATE.<stream>), are not allowed.
func (t *tokenClients) permissions(role, token string) *server.Permissions {
	s := t.stream
	pub := []string{
		"$JS.API.STREAM.INFO." + s,
		"$JS.API.STREAM.MSG.GET." + s,
		"$JS.API.CONSUMER.CREATE." + s + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + s + ".*",
		"$JS.API.CONSUMER.INFO." + s + ".*",
		"$JS.API.CONSUMER.DELETE." + s + ".*",
	}
	if role != "read" {
		pub = append(pub, SubjectAll)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{SubjectAll, InboxPrefix(token) + ".>"}},
	}
}

// admit finds who holds token and, unless it is unknown or scoped, keeps
// k as admitted by it: in one lock with recheck, so a client admitted by
// a token the reload revokes is either judged by the new tokens or
// rechecked. Past pruneAt, the clients gone are dropped first. A client
// admitted already (a reload of the server's options checks its connected
// clients again) keeps the holder it was admitted by: a token reload's
// recheck, which follows the new tokens at once, judges a change and says
// it; taking the new holder here would register its role in place and
// hide the change from the recheck.
func (t *tokenClients) admit(k clientKey, token string) (ClientToken, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, known := t.admitted.Load(k); known && a.(admitted).token == token {
		return a.(admitted).holder, true
	}
	holder, ok := t.lookup(token)
	if !ok || holder.Scoped {
		return holder, ok
	}
	if t.count >= t.pruneAt {
		open := map[*server.Server]map[uint64]bool{}
		t.admitted.Range(func(key, _ any) bool {
			k := key.(clientKey)
			if open[k.ns] == nil {
				open[k.ns] = openClients(k.ns)
			}
			if !open[k.ns][k.cid] {
				t.forget(k)
			}
			return true
		})
		t.pruneAt = max(pruneFirst, 2*t.count)
	}
	if _, known := t.admitted.Swap(k, admitted{token: token, holder: holder}); !known {
		t.count++
	}
	return holder, true
}

// forget drops k from admitted; t.mu is held.
func (t *tokenClients) forget(k clientKey) {
	if _, ok := t.admitted.LoadAndDelete(k); ok {
		t.count--
	}
}

// holderOf is who holds the token client cid of ns presented, if ns
// admitted it by one.
func (t *tokenClients) holderOf(ns *server.Server, cid uint64) (ClientToken, bool) {
	a, ok := t.admitted.Load(clientKey{ns, cid})
	if !ok {
		return ClientToken{}, false
	}
	return a.(admitted).holder, true
}

// openClients are the IDs of ns's connected clients (none once it is shut down).
func openClients(ns *server.Server) map[uint64]bool {
	open := map[uint64]bool{}
	if cz, err := ns.Connz(&server.ConnzOptions{Limit: math.MaxInt32}); err == nil {
		for _, c := range cz.Conns {
			open[c.Cid] = true
		}
	}
	return open
}

// recheck disconnects every client of ns whose token the lookup no longer
// knows, or gives to another holder, role or scope: the reloaded tokens
// judge new connections at once, and those under way from now. The
// clients gone, and those of servers replaced, are forgotten.
func (t *tokenClients) recheck(ns *server.Server) {
	t.mu.Lock()
	defer t.mu.Unlock()
	open := openClients(ns)
	t.admitted.Range(func(key, value any) bool {
		k, a := key.(clientKey), value.(admitted)
		if k.ns != ns || !open[k.cid] {
			t.forget(k)
			return true
		}
		if now, ok := t.lookup(a.token); ok && now == a.holder {
			return true
		}
		t.forget(k)
		if err := ns.DisconnectClientByID(k.cid); err == nil {
			t.log.Info("events: disconnected a NATS client: its token was revoked or changed (token reload)", "token", a.holder.Name)
		}
		return true
	})
}

// guardConsumers, with client tokens, deletes as soon as it is made a
// consumer on the stream that is no ordered pull consumer (events replay
// and tail make those): subject permissions cannot see a consumer's
// configuration, and a push consumer has the server deliver the stream to
// any subject (the daemon's own signals among them, again at every ack
// wait), a durable one stays for ever. The daemon makes neither. What is
// made while the bus hears no advisory (its connection reconnecting, to a
// server replaced among them) is found in the stream's consumers, listed
// at start and at each reconnect.
func (b *Bus) guardConsumers() error {
	if b.cfg.clients == nil {
		return nil
	}
	created := server.JSAdvisoryConsumerCreatedPre + "." + b.cfg.Stream + ".*"
	_, err := b.nc.Subscribe(created, notDelivered(func(m *nats.Msg) {
		var adv struct {
			Consumer string `json:"consumer"`
		}
		if json.Unmarshal(m.Data, &adv) == nil {
			b.dropForeignConsumer(adv.Consumer)
		}
	}))
	if err != nil {
		return fmt.Errorf("events: subscribe %s: %w", created, err)
	}
	// A status listener, not the reconnect handler: that is the bus's own.
	connected := b.nc.StatusChanged(nats.CONNECTED)
	b.bg.Go(func() {
		defer b.nc.RemoveStatusListener(connected)
		for {
			b.sweepForeignConsumers()
			select {
			case <-b.ctx.Done():
				return
			case <-connected:
			}
		}
	})
	return nil
}

// notDelivered wraps a handler of the bus's own subjects (signals,
// advisories) to drop what a consumer delivers there (its reply is a
// JetStream ack subject): a client's push consumer delivers the stream
// onto any subject as soon as it is made, before guardConsumers deletes
// it, and neither a signal nor an advisory has a reply.
func notDelivered(h nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		if !strings.HasPrefix(m.Reply, "$JS.ACK.") {
			h(m)
		}
	}
}

// clientConsumerIdle is the longest a client's consumer may stay unread:
// the jetstream package's ordered consumers go after 5 minutes; one kept
// longer is a durable in all but name.
const clientConsumerIdle = 5 * time.Minute

// dropForeignConsumer deletes the stream's consumer name if a client's
// (foreign). Its info is asked of the API itself: the jetstream package
// opens pull consumers only.
func (b *Bus) dropForeignConsumer(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, askTimeout)
	defer cancel()
	m, err := b.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.INFO."+b.cfg.Stream+"."+name, nil)
	var info struct {
		Config *jetstream.ConsumerConfig `json:"config"`
	}
	if err != nil || json.Unmarshal(m.Data, &info) != nil || info.Config == nil {
		return // gone already
	}
	b.dropIfForeign(ctx, name, info.Config)
}

// sweepForeignConsumers deletes the stream's foreign consumers (one whose
// advisory the bus missed). An error (no stream yet, an election) leaves
// them to the next sweep.
func (b *Bus) sweepForeignConsumers() {
	ctx, cancel := context.WithTimeout(b.ctx, askTimeout)
	defer cancel()
	s, err := b.js.Stream(ctx, b.cfg.Stream)
	if err != nil {
		return
	}
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		b.dropIfForeign(ctx, info.Name, &info.Config)
	}
}

// dropIfForeign deletes the stream's consumer name, of cfg, if it is a
// push or a durable one, or would outlive clientConsumerIdle unread: a
// client's (the daemon makes ordered pull consumers only), and says so.
func (b *Bus) dropIfForeign(ctx context.Context, name string, cfg *jetstream.ConsumerConfig) {
	if cfg.DeliverSubject == "" && cfg.Durable == "" && cfg.InactiveThreshold <= clientConsumerIdle {
		return
	}
	if err := b.js.DeleteConsumer(ctx, b.cfg.Stream, name); err == nil {
		b.log.Warn("events: deleted a consumer a NATS client made on the stream: clients read it through ordered pull "+
			"consumers only (events replay and tail)", "consumer", name, "deliver_subject", cfg.DeliverSubject, "durable", cfg.Durable,
			"inactive_threshold", cfg.InactiveThreshold)
	}
}

// ClientTokensChanged disconnects the embedded server's clients whose
// token (Config.ClientTokens) was revoked or changed since they connected:
// call it after the tokens are reloaded. A bus without client tokens does
// nothing.
func (b *Bus) ClientTokensChanged() {
	if b == nil || b.emb == nil || b.cfg.clients == nil {
		return
	}
	if ns := b.emb.server(); ns != nil {
		b.cfg.clients.recheck(ns)
	}
}
