package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/internal/health"
	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/metrics"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// EnvStalledAfter sets --stalled-after for serve, ls jobs and show alike.
const EnvStalledAfter = "INGESTQ_STALLED_AFTER"

// monitor puts the daemon's metrics and health probes on its HTTP server
// (/metrics, /healthz, /readyz; none with --http off) and returns the
// reactor's observer, and busStarted, to call once the bus has started.
// The server is up before that (the daemon first claims its host name,
// waiting up to twice --zk-session-timeout for one a daemon killed just now
// held): until then /metrics leaves out the bus's numbers and /readyz's nats
// check says the daemon is starting, where reading the bus's connection,
// none yet, ended the daemon. They have no authentication, as Prometheus
// and probes expect: the server belongs on the ingest hosts' private network.
func (a *app) monitor(web *httpd.Server, q *queue.Queue, bus *events.Bus, p pipeline, roles []reactor.Role, th stalled.Thresholds) (obs reactor.Observer, busStarted func()) {
	if web == nil {
		return nil, func() {}
	}
	m := metrics.New(metrics.Config{Queue: q, Session: a.session, Stalled: th, Logger: a.log})
	var started atomic.Bool
	web.Observe(m.Request)
	web.Handle("GET /metrics", m.Handler())
	web.Handle("GET /healthz", health.Alive())
	web.Handle("GET /readyz", health.Ready(a.readiness(q, bus, &started, p, roles)))
	// Go's profiles (heap, goroutines, CPU), as /metrics: for the operator
	// on the private network (`go tool pprof http://HOST/debug/pprof/heap`).
	web.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	web.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	web.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	return m, func() {
		m.WatchBus(bus)
		started.Store(true)
	}
}

// readiness is what /readyz checks: ZooKeeper and NATS answer a round trip,
// and, for an ingest daemon, the working storage has room (when it works a
// step that writes there), the storage it writes (when it works Storing)
// and the inventory it reads and writes (Processing, Recording).
func (a *app) readiness(q *queue.Queue, bus *events.Bus, started *atomic.Bool, p pipeline, roles []reactor.Role) []health.Check {
	checks := []health.Check{
		{Name: "zookeeper", Run: func(ctx context.Context) error {
			if st := a.session.State(); st != zk.StateHasSession {
				return fmt.Errorf("no session (%s)", st)
			}
			_, err := q.Exists(ctx)
			return err
		}},
		{Name: "nats", Run: func(ctx context.Context) error {
			if !started.Load() {
				return errors.New("not started yet: the daemon starts its event stream once it holds its host name (see its log)")
			}
			nc := bus.Conn()
			if !nc.IsConnected() {
				return fmt.Errorf("not connected (%s)", nc.Status())
			}
			if err := nc.FlushWithContext(ctx); err != nil {
				return err
			}
			return bus.Recording()
		}},
	}
	ing, ok := p.(*handlers.Pipeline)
	if !ok {
		return checks // pass-through: no back ends
	}
	owns := func(s queue.State) bool { return slices.Contains(roles, reactor.JobRole(s)) }
	if owns(queue.Downloading) || owns(queue.Processing) || owns(queue.Storing) || owns(queue.Recording) {
		checks = append(checks, health.Check{Name: "work", Run: ing.CheckWork})
	}
	if owns(queue.Storing) {
		checks = append(checks, health.Check{Name: "storage", Run: ing.CheckStorage})
	}
	if owns(queue.Processing) || owns(queue.Recording) {
		checks = append(checks, health.Check{Name: "inventory", Run: ing.CheckInventory})
	}
	return checks
}

// parseStalledAfter reads a --stalled-after setting; a bad one is a usage
// error naming the flag.
func parseStalledAfter(spec string) (stalled.Thresholds, error) {
	th, err := stalled.Parse(spec)
	if err != nil {
		return nil, usagef("--stalled-after %v", err)
	}
	return th, nil
}

// stalledAfterUsage is the flag's help: the syntax, and the defaults.
func stalledAfterUsage() string {
	return "how long a job may stay in a state before it counts as stalled: a duration for every state and/or STATE=DURATION,\n" +
		"like 30m,downloading=4h (default " + stalled.Defaults().String() + ") (env " + EnvStalledAfter + ")"
}
