package events

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/backoff"
)

// How a clustered bus settles its stream (docs/decisions.md, issue 11):
// JetStream in a NATS cluster needs a meta leader, which two servers elect
// in well under a second, or after an election timeout of 4 to 9 s when
// the first vote is lost; a stream whose replicas change has no leader for
// about 200 ms.
const (
	settleTimeout = 30 * time.Second       // how long events wait after a change for a meta leader and a stream that takes them; then they go on
	settlePoll    = 50 * time.Millisecond  // how often the wait looks
	askTimeout    = 2 * time.Second        // one JetStream request while settling (one lost in an election costs this)
	retryFirst    = 500 * time.Millisecond // first wait before a failed reconfiguration is tried again
	retryMax      = time.Minute
	waitWarnAfter = 10 * time.Second // a wait this long is worth a warning
	swapAckWait   = 2 * time.Second  // acks of what the old server took, before it stops
	minReplicated = 3                // servers from which the stream keeps three copies
)

// embedded is the bus's own nats-server. One given a cluster address
// (Config.Cluster) runs JetStream alone while no other daemon is known, and
// as a member of their NATS cluster otherwise: a clustered JetStream
// cannot elect a leader alone. Going from one to the other replaces the
// server, on the same ports; the bus's in-process connection follows it.
type embedded struct {
	mu     sync.Mutex
	ns     *server.Server // nil while it is being replaced
	routes []string       // the other servers ns is routed to; none: alone
	wanted []string       // what SetRoutes asked for last
	// supersede ends the reconfiguration under way (nil: none) when
	// SetRoutes asks for other routes than those it works towards.
	supersede context.CancelCauseFunc
	// caReloads counts ClusterCAReloaded's calls; caApplied is the count
	// the server's options were last made at (the pool then in force).
	caReloads, caApplied int

	// movedAlone: what the server recorded alone is in the cluster's
	// stream (publisher goroutine only; false again whenever it runs alone).
	movedAlone bool
	// moveLate: a reconfiguration ended with that move not done (the
	// stream took no events past patience, or the move failed part way),
	// so events of the same jobs may be in the stream before it, or some of
	// its copies past the duplicate window: it then sends them kept-marked.
	moveLate bool
	// joined: the server has settled as a member and said so (publisher
	// goroutine only; false again whenever the server is replaced).
	joined bool
}

// InProcessConn connects a client to the current server (nats.InProcessServer).
func (e *embedded) InProcessConn() (net.Conn, error) {
	ns := e.server()
	if ns == nil {
		return nil, errors.New("events: the embedded NATS server is restarting")
	}
	return ns.InProcessConn()
}

func (e *embedded) server() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ns
}

// clustered tells whether the server runs as a cluster member, and with
// how many servers in all.
func (e *embedded) clustered() (bool, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.routes) > 0, len(e.routes) + 1
}

// shutdown stops the current server, if any, and waits for it.
func (e *embedded) shutdown() {
	e.mu.Lock()
	ns := e.ns
	e.ns = nil
	e.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// SetRoutes tells the bus the route URLs of the other daemons' embedded
// servers now alive (Config.Cluster must be set): the server joins or
// leaves them, and the stream gets three replicas once three servers are
// in the cluster. It returns at once; the bus's publisher reconfigures in
// order with the events it sends, which wait meanwhile. The routes it has
// already change nothing: a reconfiguration holds the events up to its
// patience (30 s), and the daemon's ZooKeeper watch hands the same routes
// every minute.
func (b *Bus) SetRoutes(urls []string) {
	if b == nil || b.emb == nil || b.cfg.Cluster == "" {
		return
	}
	urls = sortedRoutes(urls)
	b.emb.mu.Lock()
	same := slices.Equal(urls, b.emb.wanted)
	if !same && b.emb.supersede != nil {
		b.emb.supersede(errSuperseded)
	}
	b.emb.wanted = urls
	b.emb.mu.Unlock()
	if !same {
		b.requestReconfigure()
	}
}

// ClusterCAReloaded tells the bus that Config.ClusterCA's pool changed
// (its Reload): the embedded server, if routed, is given it as options
// (ReloadOptions, the routes and their connections kept), so that every
// route taken or dialed from then on verifies its peer against it. It
// returns at once; the publisher does it in order with the events.
func (b *Bus) ClusterCAReloaded() {
	if b == nil || b.emb == nil || b.cfg.ClusterCA == nil {
		return
	}
	b.emb.mu.Lock()
	b.emb.caReloads++
	b.emb.mu.Unlock()
	b.requestReconfigure()
}

// sortedRoutes is urls sorted, without repeats, in a slice of its own.
func sortedRoutes(urls []string) []string {
	urls = slices.Clone(urls)
	slices.Sort(urls)
	return slices.Compact(urls)
}

// requestReconfigure asks the publisher to bring the server and the stream
// in line with the routes wanted.
func (b *Bus) requestReconfigure() {
	select {
	case b.reconf <- struct{}{}:
	default:
	}
}

// errSuperseded ends a reconfiguration whose routes SetRoutes has changed
// since it began: the publisher starts over towards the new ones at once.
// Without it a member that came and went within a second (a daemon that
// failed to start) held every event up for the whole patience, 30 s,
// waiting for a stream that was to have a replica on it.
var errSuperseded = errors.New("events: the routes changed again")

// reconfigure joins or leaves the cluster as SetRoutes asked, then makes
// sure the stream is there with its replicas and a leader, and moves into
// it what was recorded while alone. It runs on the publisher goroutine; an
// error means it is to be tried again (errSuperseded: at once).
func (b *Bus) reconfigure(parent context.Context, patience time.Duration) error {
	e := b.emb
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	e.mu.Lock()
	routes, wanted := e.routes, e.wanted
	caReloads, caStale := e.caReloads, e.caReloads != e.caApplied
	e.supersede = cancel
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.supersede = nil
		e.mu.Unlock()
	}()
	var joinErr error
	switch {
	case e.server() == nil || (len(routes) > 0) != (len(wanted) > 0):
		joinErr = b.swap(wanted) // or a server that could not be restarted is tried again
		if e.server() == nil {
			return joinErr
		}
	case !slices.Equal(routes, wanted):
		joinErr = b.reroute(wanted)
	case caStale && len(routes) > 0:
		if joinErr = b.reload(routes); joinErr == nil {
			b.log.Info("events: the NATS routes verify the other servers against the CA file in force (reloaded); the routes made are kept")
		}
	}
	if joinErr == nil { // the options made now hold the pool in force
		e.mu.Lock()
		e.caApplied = caReloads
		e.mu.Unlock()
	}
	settleErr := b.settle(ctx, patience)
	if context.Cause(ctx) == errSuperseded {
		return errSuperseded
	}
	if ctx.Err() != nil {
		return settleErr
	}
	clustered, _ := e.clustered()
	if clustered && settleErr == nil && !e.joined {
		// Only now that the meta leader has answered for the stream and
		// the stream takes this server's events: a server given routes may
		// have none connected yet.
		e.joined = true
		b.log.Info("events: embedded NATS server joined the cluster", "cluster", b.cfg.ClusterName, "routes", wanted)
	}
	// Past patience, a stream that takes events gets what was recorded
	// alone all the same; one that does not, at a later try.
	if clustered && !e.movedAlone && (settleErr == nil || b.streamTakes(ctx)) {
		if err := b.moveAloneEvents(ctx); err != nil {
			e.moveLate = true
			if context.Cause(ctx) == errSuperseded {
				return errSuperseded
			}
			return err
		}
		e.movedAlone, e.moveLate = true, false
	}
	e.moveLate = e.moveLate || clustered && !e.movedAlone
	return errors.Join(joinErr, settleErr)
}

// swap replaces the server: a cluster member when routes are given, else
// one alone. The connection reconnects to the new one by itself. A server
// that cannot join runs alone, and the join is an error to try again.
func (b *Bus) swap(routes []string) error {
	e := b.emb
	// What the old server took is acknowledged before it goes, so that
	// nothing recorded there is counted lost.
	b.waitAcks(swapAckWait)
	b.swapping.Store(true)
	defer b.swapping.Store(false)
	e.shutdown()
	ns, joinErr := startEmbedded(b.cfg, routes)
	if joinErr != nil {
		// Alone always works: keep recording while the join is retried.
		routes = nil
		var err error
		if ns, err = startEmbedded(b.cfg, nil); err != nil {
			return fmt.Errorf("events: restart the embedded NATS server: %w", err)
		}
		joinErr = fmt.Errorf("events: join the NATS cluster (running alone meanwhile): %w", joinErr)
	}
	e.mu.Lock()
	e.ns, e.routes = ns, routes
	e.mu.Unlock()
	e.movedAlone = e.movedAlone && len(routes) > 0
	e.joined = false
	if len(routes) > 0 || joinErr == nil {
		b.logMembership(routes)
	}
	return joinErr
}

// logMembership says how the embedded server starts: routed to the other
// daemons' (reconfigure says when it has joined them), or alone.
func (b *Bus) logMembership(routes []string) {
	if len(routes) > 0 {
		b.log.Info("events: embedded NATS server routed to the cluster; events wait until it has joined",
			"cluster", b.cfg.ClusterName, "routes", routes)
	} else {
		b.log.Info("events: embedded NATS server runs alone: no other daemon is known")
	}
}

// reroute changes the routes of a cluster member in place.
func (b *Bus) reroute(routes []string) error {
	if err := b.reload(routes); err != nil {
		return err
	}
	e := b.emb
	e.mu.Lock()
	e.routes = routes
	e.mu.Unlock()
	b.log.Info("events: embedded NATS server routes changed", "routes", routes)
	return nil
}

// reload gives the running server its options anew, routed to routes.
func (b *Bus) reload(routes []string) error {
	opts, err := serverOptions(b.cfg, routes)
	if err != nil {
		return err
	}
	b.reloading.Lock()
	err = b.emb.server().ReloadOptions(opts)
	b.reloading.Unlock()
	if err != nil {
		return fmt.Errorf("events: route the embedded NATS server to %v: %s", routes, maskSecret(err.Error(), b.cfg.ClusterSecret))
	}
	return nil
}

// settle makes the stream ready for the events, which wait meanwhile: it
// creates the stream or brings it up to date (three replicas once three
// servers are clustered) and waits until it takes this server's events.
// Past patience it gives up, and what could not be done (the cluster has no
// meta leader, as when a member remembers a peer gone for good, or the
// stream no quorum) is an error, tried again later. The events go on
// meanwhile: a stream that takes them gets them as it is, and one that
// does not gets them as in any split, sent again, then held and kept
// (parked.go). Waiting on until it took them held the publisher for the
// whole split, and a kill lost every event of it.
func (b *Bus) settle(ctx context.Context, patience time.Duration) error {
	start := time.Now()
	deadline := start.Add(patience)
	warned := false
	for tries := 1; ; tries++ {
		err := b.settleOnce(ctx, deadline)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if !warned && time.Since(start) > waitWarnAfter {
			warned = true
			b.log.Warn("events: waiting for the NATS cluster's JetStream; events wait meanwhile, past the patience they go on "+
				"(sent again, then held until the stream takes events)", "patience", patience, "err", err)
		}
		if !backoff.Sleep(ctx, backoff.Delay(settlePoll, time.Second, tries)) {
			return ctx.Err()
		}
	}
}

// settleOnce waits until deadline for this server to follow a meta leader,
// then ensures the stream and waits until deadline for it to take events. A
// JetStream request sent while no meta leader is known, or while one is
// being elected, gets no answer at all: each is asked under a short timeout
// of its own.
func (b *Bus) settleOnce(ctx context.Context, deadline time.Time) error {
	for !b.metaCurrent() {
		if time.Now().After(deadline) {
			return errNoMetaLeader
		}
		if !backoff.Sleep(ctx, settlePoll) {
			return fmt.Errorf("%w: %w", errNoMetaLeader, ctx.Err())
		}
	}
	ask, cancel := context.WithTimeout(ctx, askTimeout)
	err := b.ensureStream(ask)
	cancel()
	if err != nil {
		return err
	}
	return b.waitStreamTakes(ctx, deadline)
}

var errNoMetaLeader = errors.New("events: no JetStream meta leader in the NATS cluster")

// metaCurrent tells whether the server's JetStream meta state is current,
// asking it in-process: true once a new member has the leader's state, but
// also for a member restarted with its store before any route is up (a
// server that knows no leader does not check it hears one).
func (b *Bus) metaCurrent() bool {
	ns := b.emb.server()
	return ns != nil && ns.JetStreamIsCurrent()
}

// errCodeStreamNotMatch is a stream's refusal of a publish that expects
// another stream.
const errCodeStreamNotMatch = 10060

// streamTakes tells whether the stream takes this server's publishes: its
// leader refuses one that expects another stream, storing nothing, and the
// refusal comes back the way acknowledgements do. A stream info is no
// proof: JetStream's API crosses a route of its own (the system
// account's), which may be up while the one events take is not. An event
// sent then reaches only core subscribers (the API's on ingestq.job.>), so
// no "no responders" comes either, and it waits out its 15 s ack timeout
// unanswered, late past the moves after it.
func (b *Bus) streamTakes(ctx context.Context) bool {
	ask, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	_, err := b.js.Publish(ask, "ingestq.probe."+token(b.cfg.Host), nil, jetstream.WithExpectStream(b.cfg.Stream+"-probe"))
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == errCodeStreamNotMatch
}

// waitStreamTakes waits until the stream takes this server's events, asking
// once more past deadline: a stream whose replicas changed, or whose leader
// went, has no leader for a moment, and a new member's routes come up one
// by one.
func (b *Bus) waitStreamTakes(ctx context.Context, deadline time.Time) error {
	for !b.streamTakes(ctx) {
		if time.Now().After(deadline) {
			return fmt.Errorf("events: stream %s takes no event from this server", b.cfg.Stream)
		}
		if !backoff.Sleep(ctx, settlePoll) {
			return fmt.Errorf("events: stream %s takes no event from this server: %w", b.cfg.Stream, ctx.Err())
		}
	}
	return nil
}

// wantReplicas is how many copies of the stream this bus asks for: three
// in an embedded cluster of three servers or more, else one. ensureStream
// never lowers what the stream has (an operator's choice, or a cluster
// that has shrunk for a while).
func (b *Bus) wantReplicas() int {
	if b.emb == nil {
		return 1
	}
	if _, servers := b.emb.clustered(); servers >= minReplicated {
		return minReplicated
	}
	return 1
}

// waitAcks waits up to d for every JetStream publish to be acknowledged.
func (b *Bus) waitAcks(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.flying.done():
	case <-t.C:
	}
}

// moveAloneEvents moves what the server recorded while it ran alone (its
// store under DataDir/nats) into the cluster's stream, then deletes it
// there: every host's replay then shows it. It reads the old store with a
// server of its own, in-process, and sends each event with its ID as the
// message ID, so a move cut short and done again adds none twice within
// the stream's duplicate window. A move done late (moveLate) sends them
// kept-marked, as parked events are: Replay then leaves out a copy stored
// by an earlier try past that window, and a job's timeline places each
// before its job's later moves that reached the stream first.
func (b *Bus) moveAloneEvents(ctx context.Context) error {
	dir := filepath.Join(b.cfg.DataDir, "nats")
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	alone := b.cfg
	alone.Listen = ""
	ns, err := startEmbedded(alone, nil)
	if err != nil {
		return fmt.Errorf("events: open the store recorded alone: %w", err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect("", nats.InProcessServer(ns), asBus())
	if err != nil {
		return fmt.Errorf("events: open the store recorded alone: %w", err)
	}
	defer nc.Close()
	old, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := old.Stream(ctx, b.cfg.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	n, err := b.copyEvents(ctx, nc)
	if err != nil {
		return err
	}
	if err := old.DeleteStream(ctx, b.cfg.Stream); err != nil {
		return fmt.Errorf("events: delete the stream recorded alone: %w", err)
	}
	b.log.Info("events: moved the events recorded alone into the cluster's stream", "events", n)
	return nil
}

// copyEvents publishes this queue's events of the stream on from into the
// cluster's, and waits for every acknowledgement.
func (b *Bus) copyEvents(ctx context.Context, from *nats.Conn) (int, error) {
	var mu sync.Mutex
	var failed error
	// Under the ack timeout: a stream that stops taking events mid-move
	// would otherwise hold the publisher until it took them again.
	onErr := func(_ jetstream.JetStream, _ *nats.Msg, err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed == nil {
			failed = err
		}
	}
	to, err := jetstream.New(b.nc, jetstream.WithPublishAsyncTimeout(b.cfg.ackTimeout), jetstream.WithPublishAsyncErrHandler(onErr))
	if err != nil {
		return 0, err
	}
	// This queue's events only: a store taken over from another queue
	// (ownStream) starts this queue's at metaQueueFrom, which the cluster's
	// stream does not have, so the old queue's would pass for this one's.
	// A store of another queue altogether is moved whole, as before.
	only := Filter{Queue: b.cfg.Queue}
	if errors.Is(CheckStream(ctx, from, b.cfg.Stream, only.Queue), ErrOtherQueue) {
		only.Queue = ""
	}
	n := 0
	err = Replay(ctx, from, b.cfg.Stream, only, func(e Event) error {
		data, err := marshal(e)
		if err == nil {
			msg := &nats.Msg{Subject: e.Subject(), Data: data, Header: nats.Header{}}
			if b.emb.moveLate {
				msg.Header.Set(keptHeaderKey, "1")
			}
			_, err = to.PublishMsgAsync(msg, jetstream.WithMsgID(e.ID))
		}
		n++
		return err
	})
	if err != nil {
		return n, fmt.Errorf("events: move the events recorded alone: %w", err)
	}
	select {
	case <-to.PublishAsyncComplete():
	case <-ctx.Done():
		return n, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		return n, fmt.Errorf("events: move the events recorded alone: %w", failed)
	}
	return n, nil
}
