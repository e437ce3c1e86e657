// Package api is the daemon's REST API under /api/v1: JSON over the
// service layer (package ops) that the CLI uses too, so both make the same
// checks and give the same refusals. Errors are problem documents (RFC
// 9457). Every route needs a role (auth.go); openapi.json describes them
// all, and a test holds the two to each other.
//
// One file per resource: batches.go, jobs.go, holds.go (holds, hosts,
// objects), access.go (access requests), profiles.go, events.go
// (server-sent events), audit.go (the audit of storage, as NDJSON).
// shown.go holds the one rule of what a token below admin is shown of a
// URL (Caller.Shown), which the dashboard follows too.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// Prefix is where the API is mounted on the daemon's HTTP server.
const Prefix = "/api/v1/"

// Config is what the API serves from.
type Config struct {
	Ops *ops.Service
	// Bus gives the live events, the jobs' timelines and the pace of the
	// estimates; nil: none of those.
	Bus *events.Bus
	// Inventory answers for objects; nil when the daemon has none (the
	// pass-through pipeline).
	Inventory inventory.Inventory
	// Audit compares the inventory's objects with their storage targets;
	// nil when the daemon has no storage (the pass-through pipeline).
	Audit *audit.Auditor
	// Tokens are the bearer tokens; none: reads are open and changes refused.
	Tokens *Tokens
	// Stalled starts a request's check of its jobs, which flags a stalled
	// job with its reason (nil: not stalled), for the jobs' stalled filter
	// and a job's detail; nil: the filter answers 501.
	Stalled func(context.Context) func(*queue.Job) *stalled.Stall
	Logger  *slog.Logger
}

// Route is one route: a method, a path under Prefix (a net/http pattern)
// and the role it needs.
type Route struct {
	Method string
	Path   string
	Role   Role
}

// API is the API's handler.
type API struct {
	cfg    Config
	mux    *http.ServeMux
	routes []Route
	ctx    context.Context // ends with Close: event streams end with it
	cancel context.CancelFunc
	unsub  func()
}

// handler serves one route for caller; its error is answered as a problem.
type handler func(w http.ResponseWriter, r *http.Request, caller Caller) error

// New makes the API and starts following the events for its estimates.
func New(cfg Config) (*API, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Ops.Pace == nil {
		cfg.Ops.Pace = ops.NewPace()
	}
	if cfg.Ops.Inventory == nil && cfg.Inventory != nil {
		cfg.Ops.Inventory = cfg.Inventory // access requests are estimated from it
	}
	a := &API{cfg: cfg, mux: http.NewServeMux(), unsub: func() {}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	if cfg.Bus != nil {
		unsub, err := cfg.Bus.Subscribe("ingestq.job.>", cfg.Ops.Pace.Observe)
		if err != nil {
			return nil, err
		}
		a.unsub = unsub
	}
	a.batchRoutes()
	a.jobRoutes()
	a.holdRoutes()
	a.accessRoutes()
	a.profileRoutes()
	a.auditRoutes()
	a.handle("GET", "/events", RoleRead, a.events)
	a.handle("GET", "/openapi.json", RoleNone, serveOpenAPI)
	return a, nil
}

// Close ends the event streams and the estimates' subscription.
func (a *API) Close() {
	a.cancel()
	a.unsub()
}

// Routes lists the routes, as registered.
func (a *API) Routes() []Route { return a.routes }

// handle registers a route that needs role.
func (a *API) handle(method, path string, role Role, h handler) {
	a.routes = append(a.routes, Route{Method: method, Path: path, Role: role})
	a.mux.HandleFunc(method+" "+strings.TrimSuffix(Prefix, "/")+path, func(w http.ResponseWriter, r *http.Request) {
		caller, err := a.cfg.Tokens.caller(r, role)
		if role != RoleNone && caller.Role < RoleAdmin {
			w = pathHider{w, a.cfg.Ops.Q.Root()} // only an admin token sees the server's paths
		}
		if err == nil {
			// The token's name is the actor of what the request changes.
			err = h(w, r.WithContext(ops.WithActor(r.Context(), caller.Name)), caller)
		}
		if err != nil {
			a.answerError(w, r, err, caller)
		}
	})
}

func (a *API) answerError(w http.ResponseWriter, r *http.Request, err error, caller Caller) {
	if p := problemOf(err); p.Status >= http.StatusInternalServerError {
		a.cfg.Logger.Warn("api: "+r.Method+" "+r.URL.Path, "status", p.Status, "err", err)
	}
	writeProblem(w, r, ForCaller(err, caller)) // the log above says where, and why
}

// ServeHTTP serves a request under Prefix. A path no route has is a 404
// problem, a method a route does not take a 405 one.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern == "" {
		rec := &statusOnly{header: http.Header{}} // what the mux says: 404, or 405 with Allow
		a.mux.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		writeProblem(w, r, &apiError{status: rec.code, kind: strings.ToLower(strings.ReplaceAll(http.StatusText(rec.code), " ", "-")),
			msg: "no route " + r.Method + " " + r.URL.Path + " (see " + Prefix + "openapi.json)"})
		return
	}
	a.mux.ServeHTTP(w, r)
}

// statusOnly keeps the status and headers of an answer, not its body.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(p []byte) (int, error) { return len(p), nil }
func (s *statusOnly) WriteHeader(code int)        { s.code = code }
