package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// natsRoutes makes the daemons' embedded NATS servers one cluster by
// themselves: each daemon announces its server's route URL in an ephemeral
// node (/ingestq/routes/<host>, gone with its session), and routes its
// server to those of every other live daemon, as they come and go.
type natsRoutes struct {
	q    *queue.Queue
	host string // this daemon's name, its node's name
	url  string // its server's route URL
	log  *slog.Logger
}

// announce claims this daemon's route node with its URL (a live daemon of
// the same name is refused), once its server listens: the other daemons
// dial it as soon as they read it, and a URL announced before the server
// listened got each of them a refused connection (nats-server's warning
// "Error trying to connect to route") at every start. The node is never
// written without its URL, which a daemon of an earlier release would
// take for a route.
func (n *natsRoutes) announce(ctx context.Context) error {
	return n.q.AnnounceRoute(ctx, n.host, n.url)
}

// comeBack readies a host that an operator had forgotten (ingestq hosts
// forget) and that starts again, and deletes the note. When a daemon noted
// that the NATS cluster dropped its server, a server that still holds the
// cluster's state from before would find itself removed and turn
// JetStream off: its cluster store goes (the events are in the copies of
// the hosts that stayed), and it joins as a new member. When none did (no
// daemon was in a cluster since: in one of two hosts, the other ran alone,
// and this store may hold the only copy), the store stays.
func (n *natsRoutes) comeBack(ctx context.Context, dataDir string) error {
	h, forgotten, err := n.q.Forgotten(ctx, n.host)
	if err != nil || !forgotten {
		return err
	}
	var note ops.ForgottenNote
	_ = json.Unmarshal(h.Data, &note) // unreadable: taken as not removed, the store kept
	if note.Removed == nil {
		n.log.Warn("nats: this host was forgotten (ingestq hosts forget), but the NATS cluster never dropped its server; it keeps its NATS cluster store",
			"forgotten", h.Since.UTC().Format(time.RFC3339), "note", string(h.Data))
		return n.q.Remember(ctx, n.host)
	}
	store := events.ClusterStore(dataDir)
	if err := os.RemoveAll(store); err != nil {
		return fmt.Errorf("host %s was forgotten: drop its NATS cluster store: %w", n.host, err)
	}
	n.log.Warn("nats: this host was forgotten by the cluster (ingestq hosts forget); it joins afresh, without its old NATS cluster store",
		"forgotten", h.Since.UTC().Format(time.RFC3339), "note", string(h.Data), "dropped", store)
	return n.q.Remember(ctx, n.host)
}

// others lists the route URLs the other live daemons announced.
func (n *natsRoutes) others(ctx context.Context) ([]string, error) {
	routes, err := n.q.Routes(ctx)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, r := range routes {
		if r.Name != n.host {
			urls = append(urls, string(r.Data))
		}
	}
	return urls, nil
}

// follow hands bus the other daemons' routes each time they change (a
// watch on the routes folder), and announces this daemon's again on each
// new session (its node went with an expired one), until the returned stop
// is called.
func (n *natsRoutes) follow(s *zkwatch.Session, bus *events.Bus) (stop func()) {
	changed := make(chan struct{}, 1)
	wake := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var reannounce atomic.Bool
	unhook := s.OnConnect(func() { reannounce.Store(true); wake() })
	w := zkwatch.NewWatcher(s, zkwatch.WatcherConfig{Logger: n.log}, func(zkwatch.Change) { wake() })
	w.Watch(n.q.RoutesFolder())
	w.Watch(n.q.ForgottenFolder())
	forgot := map[string]time.Time{} // hosts this daemon had the cluster forget, and since when they were forgotten
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tries, forgetTries := 0, 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			var err error
			if reannounce.Swap(false) {
				if err = n.q.AnnounceRoute(ctx, n.host, n.url); err != nil {
					reannounce.Store(true)
				}
			}
			var urls []string
			if err == nil {
				urls, err = n.others(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				tries++
				n.log.Warn("nats: the daemons' routes not read; trying again", "err", err)
				if backoff.Sleep(ctx, backoff.Delay(time.Second, time.Minute, tries)) {
					wake()
				}
				continue
			}
			tries = 0
			bus.SetRoutes(urls)
			// A removal that fails is asked again after a pause, without
			// holding up the routes meanwhile. Every daemon asks at once, so
			// "a membership change in flight" is the common first answer.
			if err := n.forget(ctx, bus, forgot); err != nil && ctx.Err() == nil {
				forgetTries++
				d := backoff.Delay(time.Second, time.Minute, forgetTries)
				level := slog.LevelInfo
				if forgetTries > 2 {
					level = slog.LevelWarn
				}
				n.log.Log(ctx, level, "nats: a forgotten host is still in the NATS cluster; asking again", "in", d, "err", err)
				time.AfterFunc(d, wake)
			} else {
				forgetTries = 0
			}
		}
	}()
	return func() {
		unhook()
		w.Close()
		cancel()
		<-done
	}
}

// forgetTimeout bounds one request to forget a host: it waits for the
// JetStream meta leader, which a cluster electing one does not answer.
const forgetTimeout = 2 * time.Second

// forget has the NATS cluster drop the servers of the hosts an operator
// took out for good (ingestq hosts forget), each once per note, and notes
// in it that the server was removed (comeBack reads that); every daemon
// asks, and the first removal makes the others' no-ops. A daemon whose
// server runs alone asks on the routes' next change.
func (n *natsRoutes) forget(ctx context.Context, bus *events.Bus, forgot map[string]time.Time) error {
	hosts, err := n.q.ForgottenHosts(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if since, ok := forgot[h.Name]; ok && since.Equal(h.Since) {
			continue
		}
		if h.Name == n.host {
			// Forgotten while it runs (its session had expired): its server
			// is dropped and its JetStream turns off; a restart rejoins.
			n.log.Error("nats: this running host was forgotten (ingestq hosts forget); restart it to record events again", "note", string(h.Data))
			forgot[h.Name] = h.Since
			continue
		}
		ask, cancel := context.WithTimeout(ctx, forgetTimeout)
		err := bus.ForgetHost(ask, h.Name)
		cancel()
		if errors.Is(err, events.ErrNotClustered) {
			return nil // asked again on the routes' next change
		}
		if err != nil {
			return err
		}
		var note ops.ForgottenNote
		if json.Unmarshal(h.Data, &note) == nil && note.Removed == nil {
			now := time.Now().UTC().Truncate(time.Second)
			note.Removed, note.RemovedBy = &now, n.host
			data, _ := json.Marshal(note)
			if err := n.q.RewriteForgotten(ctx, h.Name, data); err != nil {
				return err
			}
		}
		forgot[h.Name] = h.Since
		n.log.Info("nats: the NATS cluster no longer counts a forgotten host's server", "host", h.Name, "forgotten", h.Since.UTC().Format(time.RFC3339))
	}
	return nil
}

// minSecret is the shortest cluster secret taken: a route into the
// cluster may be tried again and again, as fast as the network allows.
const minSecret = 16

// clusterSecret reads --nats-cluster-secret-file: one line, the same on
// every host, never shown nor written to ZooKeeper (the routes announced
// there have no password; the bus adds it to the routes it dials). Without
// one, a cluster listener other hosts can reach is warned of.
func (a *app) clusterSecret(f serveFlags) (string, error) {
	file := f.natsSecret
	if file == "" {
		host, _, _ := net.SplitHostPort(f.natsCluster)
		if only, _ := loopbackOnly(host); f.natsCluster != "" && !only {
			a.log.Warn("--nats-cluster: the routes are not authenticated: whatever reaches the port joins the cluster, reads every event "+
				"and may publish its own; give every host the same --nats-cluster-secret-file, or keep the port on a private network",
				"nats_cluster", f.natsCluster)
		}
		return "", nil
	}
	if f.natsCluster == "" {
		return "", usagef("--nats-cluster-secret-file %s: it authenticates the routes of --nats-cluster, which is not given", file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", usagef("--nats-cluster-secret-file: %v", err)
	}
	secret := strings.TrimSpace(string(data))
	switch {
	case secret == "":
		return "", usagef("--nats-cluster-secret-file %s is empty: write the secret into it (openssl rand -hex 32), the same on every host", file)
	case strings.ContainsAny(secret, "\r\n"):
		return "", usagef("--nats-cluster-secret-file %s holds more than one line: want the secret alone", file)
	case len(secret) < minSecret:
		return "", usagef("--nats-cluster-secret-file %s: the secret has %d characters, want %d or more (openssl rand -hex 32)", file, len(secret), minSecret)
	}
	a.warnOpenFile("--nats-cluster-secret-file: the secret's file", file)
	return secret, nil
}

// loopbackOnly tells whether host, as a listener is given (an IP address,
// a name, or none: every interface), is reached from this machine only,
// and what it resolves to.
func loopbackOnly(host string) (bool, []net.IP) {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), []net.IP{ip}
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, nil
	}
	return !slices.ContainsFunc(ips, func(ip net.IP) bool { return !ip.IsLoopback() }), ips
}

// natsClusterName names the NATS cluster of the daemons of one queue: after
// the queue's root, so that the daemons of two queues never make one.
func natsClusterName(root string) string {
	name := "ingestq" + strings.ReplaceAll(root, "/", "-")
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
}
