package cli

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
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

// announce claims this daemon's route node (a live daemon of the same name
// is refused) and returns the other daemons' route URLs.
func (n *natsRoutes) announce(ctx context.Context) ([]string, error) {
	if err := n.q.AnnounceRoute(ctx, n.host, n.url); err != nil {
		return nil, err
	}
	return n.others(ctx)
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for tries := 0; ; {
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
		}
	}()
	return func() {
		unhook()
		w.Close()
		cancel()
		<-done
	}
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
