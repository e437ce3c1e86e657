package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// handOverWait bounds how long a stopping daemon waits for other members
// to take over what its server led (the stream, the meta group): a stop
// takes at most this much longer.
const handOverWait = 3 * time.Second

// replicaSeen: a member unheard for longer (raft heartbeats every second)
// may not be there to elect a leader.
const replicaSeen = 2 * time.Second

// onLeaderElected handles the stream's LEADER_ELECTED advisory: the
// publisher sends again what is unanswered (leaderElected), and a hand-over
// under way (handOverStream) hears who leads now.
func (b *Bus) onLeaderElected(m *nats.Msg) {
	b.leaderElected(m)
	if w := b.handingOver.Load(); w != nil {
		var adv server.JSStreamLeaderElectedAdvisory
		if json.Unmarshal(m.Data, &adv) == nil {
			select {
			case *w <- adv.Leader:
			default:
			}
		}
	}
}

// handOver, at a planned stop of a cluster member of 3 or more, has the
// other members elect the leaders this server has, while it still runs:
// the stream's, whose leader takes every daemon's events, and JetStream's
// meta leader, which answers every consumer a replay or a follower makes.
// nats-server's own hand-over at shutdown names a follower once and stops
// its routes ~100 ms later; when the follower does not take over, the
// others elect a leader after their raft election timeout, 4 to 9 s, and
// events and replays wait unanswered meanwhile (decision 923). Here this
// server stays up through each election, to carry the transfer and vote.
// Together they take handOverWait at most; whatever fails is said and the
// stop goes on.
func (b *Bus) handOver() {
	ns := b.emb.server()
	if ns == nil {
		return
	}
	if _, servers := b.emb.clustered(); servers < minReplicated {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handOverWait)
	defer cancel()
	if ns.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, b.cfg.Stream) {
		b.handOverStream(ctx)
	}
	if ns.JetStreamIsLeader() {
		b.handOverMeta(ctx)
	}
}

// handOverStream asks the stream to elect another leader and waits for
// the election (the stream's advisory, onLeaderElected).
func (b *Bus) handOverStream(ctx context.Context) {
	start := time.Now()
	heir, err := b.heir(ctx)
	if err != nil {
		b.log.Info("events: this server leads the event stream, and stops without handing it over", "err", err)
		return
	}
	elected := make(chan string, 4)
	b.handingOver.Store(&elected)
	defer b.handingOver.Store(nil)
	if err := b.askStepDown(ctx, b.nc, "$JS.API.STREAM.LEADER.STEPDOWN."+b.cfg.Stream, heir); err != nil {
		b.log.Info("events: the event stream's leadership was not handed over before this server stops; "+
			"the other members elect a leader after their election timeout, 4 to 9 s", "err", err)
		return
	}
	me := serverName(b.cfg.Host)
	poll := time.NewTicker(othersStopPoll)
	defer poll.Stop()
	for {
		select {
		case leader := <-elected:
			if leader == "" || leader == me {
				continue
			}
			b.log.Info("events: handed the event stream's leadership over before stopping", "leader", leader,
				"took", time.Since(start).Round(time.Millisecond))
			return
		case <-poll.C:
			if err := b.othersStopping(b.cfg.Stream); err != nil {
				b.log.Info("events: the other members stop too; this server stops without waiting for a new leader "+
					"of the event stream", "err", err, "waited", time.Since(start).Round(time.Millisecond))
				return
			}
		case <-ctx.Done():
			b.log.Info("events: no new leader of the event stream heard before this server stops; the other members "+
				"elect one after their election timeout, 4 to 9 s", "waited", time.Since(start).Round(time.Millisecond))
			return
		}
	}
}

// handOverMeta asks JetStream's meta leader, this server, to step down
// ($JS.API.META.LEADER.STEPDOWN, the system account's: as ForgetHost,
// through the system user) and waits for the election's advisory, which
// the new meta leader sends to the system account.
func (b *Bus) handOverMeta(ctx context.Context) {
	start := time.Now()
	if err := b.metaElectsWithout(); err != nil {
		b.log.Info("events: this server is JetStream's meta leader, and stops without handing it over", "err", err)
		return
	}
	nc, err := nats.Connect("", nats.InProcessServer(b.emb), asSystem(), nats.Name("ingestq-handover@"+b.cfg.Host))
	if err != nil {
		b.log.Info("events: JetStream's meta leadership was not handed over before this server stops", "err", err)
		return
	}
	defer nc.Close()
	elected, err := nc.SubscribeSync(server.JSAdvisoryDomainLeaderElected)
	if err == nil {
		err = nc.FlushWithContext(ctx)
	}
	if err == nil {
		err = b.askStepDown(ctx, nc, server.JSApiLeaderStepDown, "")
	}
	if err != nil {
		b.log.Info("events: JetStream's meta leadership was not handed over before this server stops; the other "+
			"members elect a meta leader after their election timeout, 4 to 9 s", "err", err)
		return
	}
	for {
		m, err := elected.NextMsg(othersStopPoll)
		if errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			if err := b.othersStopping(""); err != nil {
				b.log.Info("events: the other members stop too; this server stops without waiting for a new JetStream "+
					"meta leader", "err", err, "waited", time.Since(start).Round(time.Millisecond))
				return
			}
			continue
		}
		if err != nil {
			b.log.Info("events: no new JetStream meta leader heard before this server stops; the other members "+
				"elect one after their election timeout, 4 to 9 s", "waited", time.Since(start).Round(time.Millisecond))
			return
		}
		var adv server.JSDomainLeaderElectedAdvisory
		// The advisory names the leader's raft node; this server has
		// stepped down, so any leader now is another. The server is read
		// anew (nil once stopped: then no leader is said).
		if ns := b.emb.server(); json.Unmarshal(m.Data, &adv) == nil && adv.Leader != "" && ns != nil && !ns.JetStreamIsLeader() {
			b.log.Info("events: handed JetStream's meta leadership over before stopping", "took", time.Since(start).Round(time.Millisecond))
			return
		}
	}
}

// heir is the stream's replica to take over, the least behind, once the
// others can elect leaders without this server (electsWithout). Under a
// steady flow of events a replica is often a few entries behind, those on
// their way to it: not a reason to keep the leadership.
func (b *Bus) heir(ctx context.Context) (string, error) {
	s, err := b.js.Stream(ctx, b.cfg.Stream)
	if err != nil {
		return "", fmt.Errorf("stream info: %w", err)
	}
	c := s.CachedInfo().Cluster
	if c == nil || len(c.Replicas) == 0 {
		return "", errors.New("the stream has no other replica")
	}
	others := make([]peer, len(c.Replicas))
	for i, r := range c.Replicas {
		others[i] = peer{r.Name, r.Offline, r.Active}
	}
	if err := electsWithout(others); err != nil {
		return "", err
	}
	return slices.MinFunc(c.Replicas, func(x, y *jetstream.PeerInfo) int { return cmp.Compare(x.Lag, y.Lag) }).Name, nil
}

// peer is another member of a raft group, as JetStream reports it.
type peer struct {
	name    string
	offline bool
	active  time.Duration // since it was last heard
}

// electsWithout tells whether the group's other members, online and heard
// lately, are a majority of it with this server gone: else they can elect
// no leader once it stops, and a hand-over only waits in vain.
func electsWithout(others []peer) error {
	up := 0
	var down []string
	for _, p := range others {
		if p.offline || p.active > replicaSeen {
			down = append(down, p.name)
			continue
		}
		up++
	}
	if quorum := (len(others)+1)/2 + 1; up < quorum {
		return fmt.Errorf("only %d of the other %d members are up (offline or unheard: %v)", up, len(others), down)
	}
	return nil
}

// metaElectsWithout is electsWithout for the meta group.
func (b *Bus) metaElectsWithout() error {
	others, err := b.groupPeers("")
	if err != nil {
		return err
	}
	return electsWithout(others)
}

// groupPeers is the other members of the stream's raft group, or of the
// meta group (stream ""), as this server knows them: no request goes out,
// so it answers after a step-down too. A member is offline here from the
// moment its server announces its shutdown.
func (b *Bus) groupPeers(stream string) ([]peer, error) {
	ns := b.emb.server()
	if ns == nil {
		return nil, errors.New("the server has stopped")
	}
	opts := &server.JSzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Streams: stream != ""}
	info, err := ns.Jsz(opts)
	if err != nil {
		return nil, fmt.Errorf("JetStream information: %w", err)
	}
	var replicas []*server.PeerInfo
	if stream == "" {
		if info.Meta == nil {
			return nil, errors.New("no meta group information")
		}
		replicas = info.Meta.Replicas
	} else {
		found := false
		for _, acc := range info.AccountDetails {
			for _, sd := range acc.Streams {
				if sd.Name == stream && sd.Cluster != nil {
					replicas, found = sd.Cluster.Replicas, true
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("stream %s not on this server", stream)
		}
	}
	others := make([]peer, len(replicas))
	for i, r := range replicas {
		others[i] = peer{r.Name, r.Offline, r.Active}
	}
	return others, nil
}

// othersStopPoll: how often a hand-over's wait looks whether the others
// are stopping too.
const othersStopPoll = 50 * time.Millisecond

// othersStopping tells why the group's others (the stream's replicas, or
// the meta group's: stream "") can no longer elect a leader without this
// server, too many of them having announced their shutdown; nil while they
// can. Every daemon stopped at once (systemctl stop on all hosts) handed
// over to another stopping one and waited the whole handOverWait. How
// lately they were heard is not asked: after its step-down this server, a
// follower, no longer hears from them.
func (b *Bus) othersStopping(stream string) error {
	others, err := b.groupPeers(stream)
	if err != nil {
		return nil // unknown: the wait's bound still holds
	}
	for i := range others {
		others[i].active = 0
	}
	return electsWithout(others)
}

// askStepDown sends a leader step-down request of JetStream's API on nc,
// naming heir as the one to take over ("": JetStream picks one).
func (b *Bus) askStepDown(ctx context.Context, nc *nats.Conn, subject, heir string) error {
	var req []byte
	if heir != "" {
		var err error
		if req, err = json.Marshal(map[string]any{"placement": map[string]string{"preferred": heir}}); err != nil {
			return err
		}
	}
	m, err := nc.RequestWithContext(ctx, subject, req)
	if err != nil {
		return fmt.Errorf("step-down request %s: %w", subject, err)
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return fmt.Errorf("step-down answer %q: %w", m.Data, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("step-down refused: %w", resp.Error)
	}
	return nil
}
