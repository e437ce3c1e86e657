package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/api"
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

// monitor puts the daemon's metrics, health probes and Go's profiles on
// its HTTP server (/metrics, /healthz, /readyz, /debug/pprof/; none with
// --http off) and returns the reactor's observer, and busStarted, to call
// once the bus has started. The server is up before that (the daemon first
// claims its host name, waiting up to twice --zk-session-timeout for one a
// daemon killed just now held): until then /metrics leaves out the bus's
// numbers and /readyz's nats check says the daemon is starting, where
// reading the bus's connection, none yet, ended the daemon. The probes
// have no authentication, as probes expect; /metrics has none unless
// metricsToken (--metrics-auth token), as Prometheus expects; the profiles
// ask an admin token of a daemon with tokens (pprofRoutes).
func (a *app) monitor(web *httpd.Server, tokens *api.Tokens, metricsToken bool, q *queue.Queue, bus *events.Bus, p pipeline, roles []reactor.Role, th stalled.Thresholds,
	expiry []expiring) (obs reactor.Observer, busStarted func()) {
	if web == nil {
		return nil, func() {}
	}
	m := metrics.New(metrics.Config{Queue: q, Session: a.session, Stalled: th, CertExpiry: certExpiry(expiry), Logger: a.log})
	var started atomic.Bool
	web.Observe(m.Request)
	scrape := m.Handler()
	if metricsToken {
		scrape = tokens.Guard(api.RoleRead, scrape) // any role: Prometheus's is a read token of --api-tokens
	}
	web.Handle("GET /metrics", scrape)
	web.Handle("GET /healthz", health.Alive())
	web.Handle("GET /readyz", health.Ready(a.readiness(q, bus, &started, p, roles)))
	pprofRoutes(web, tokens)
	return m, func() {
		m.WatchBus(bus)
		started.Store(true)
	}
}

// maxProfileSeconds bounds pprof's seconds (a CPU profile, a trace, a delta
// profile): the server has no whole-request deadline, so seconds=3600 held
// the CPU profiler an hour.
const maxProfileSeconds = 60

// sampling is held by a CPU profile or a trace under way: the process's,
// as the runtime's profiler and tracer are.
var sampling sync.Mutex

// pprofRoutes serves Go's profiles (heap, goroutines, CPU, trace) to an
// admin token of a daemon with tokens (to anyone without, as before): the
// goroutines' stacks show the code's paths and arguments, and a CPU
// profile or a trace costs the daemon CPU. seconds is bounded, and one CPU
// profile or trace runs at a time. go tool pprof sends no header: the
// operator fetches with curl -H 'Authorization: Bearer …' and reads the
// file (README, "Profiles").
func pprofRoutes(web *httpd.Server, tokens *api.Tokens) {
	admin := func(h http.Handler) http.Handler { return tokens.Guard(api.RoleAdmin, boundSeconds(h)) }
	web.Handle("GET /debug/pprof/", admin(http.HandlerFunc(pprof.Index)))
	web.Handle("GET /debug/pprof/profile", admin(oneAtATime(&sampling, pprof.Profile)))
	web.Handle("GET /debug/pprof/trace", admin(oneAtATime(&sampling, pprof.Trace)))
}

// boundSeconds refuses a seconds over maxProfileSeconds, or not a positive
// number, 400 as pprof's own refusals (plain text).
func boundSeconds(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := r.URL.Query().Get("seconds"); s != "" {
			if sec, err := strconv.ParseFloat(s, 64); err != nil || !(sec > 0 && sec <= maxProfileSeconds) {
				http.Error(w, fmt.Sprintf("seconds=%s: want a number of seconds over 0 and at most %d (this daemon's bound on a profile or a trace)",
					s, maxProfileSeconds), http.StatusBadRequest)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// oneAtATime runs h for one request at a time: another meanwhile is
// refused, 409, where the runtime's "cpu profiling already in use" was a
// 500 (and a trace beside a CPU profile ran).
func oneAtATime(busy *sync.Mutex, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !busy.TryLock() {
			http.Error(w, r.URL.Path+": a CPU profile or a trace is under way on this daemon (one at a time); ask again when it ends", http.StatusConflict)
			return
		}
		defer busy.Unlock()
		h(w, r)
	})
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
