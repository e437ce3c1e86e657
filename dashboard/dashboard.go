// Package dashboard is the daemon's web dashboard, under /ui/ on its HTTP
// server: an overview of the queue, the batches with their progress, a
// batch's jobs, a job's timeline with the actions its state allows, the
// access requests, and a search by ARK or local id. Pages are html/template
// files and a little JavaScript, embedded in the binary.
//
// Pages are live: the dashboard keeps its own ZooKeeper watches on every
// job state folder, the batches, the holds, the hosts and the access
// queues (live.go), so a move by any writer of the queue, Merritt's own
// services included, is seen the moment ZooKeeper tells of it; the daemons'
// batch, admin and access events cover what changes no folder. Each open
// page holds a server-sent event stream (/ui/live) that says when something
// changed, and fetches its main part again.
//
// Reads and actions follow the API's rules (package api) and go through
// the same service layer (package ops), with the same refusals. The
// browser gives its token once, in a form; it is kept in an HttpOnly,
// SameSite=Strict cookie, and every change is a POST checked by the
// standard library's cross-origin protection.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
	"github.com/ingestq/ingestq/zkwatch"
)

// Prefix is where the dashboard is mounted; "/" redirects to it.
const Prefix = "/ui/"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config is what the dashboard shows and acts on.
type Config struct {
	Ops     *ops.Service
	Session *zkwatch.Session // the dashboard's watches run on it
	// Bus gives the jobs' timelines and the batch and admin events; nil:
	// neither.
	Bus *events.Bus
	// Inventory answers a search for stored objects; nil: jobs only.
	Inventory inventory.Inventory
	// Tokens are the API's tokens: the same rules hold here.
	Tokens *api.Tokens
	// Stalled starts a request's check of its jobs, which flags a stalled
	// job with its reason (nil: not stalled); nil: not detected.
	Stalled func(context.Context) func(*queue.Job) *stalled.Stall
	Logger  *slog.Logger
}

// Dashboard is the dashboard's handler.
type Dashboard struct {
	cfg    Config
	hub    *hub
	mux    *http.ServeMux
	pages  map[string]*template.Template
	guard  *http.CrossOriginProtection
	ctx    context.Context // ends with Close: live streams end with it
	cancel context.CancelFunc
}

// New makes the dashboard and starts its watches.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Ops == nil || cfg.Session == nil {
		return nil, errors.New("dashboard: Ops and Session are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h, err := newHub(cfg.Ops.Q, cfg.Session, cfg.Bus, cfg.Logger)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{cfg: cfg, hub: h, mux: http.NewServeMux(), pages: pages, guard: http.NewCrossOriginProtection()}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.routes()
	return d, nil
}

// Close stops the watches and ends the live streams.
func (d *Dashboard) Close() {
	d.cancel()
	d.hub.close()
}

func (d *Dashboard) routes() {
	static, _ := fs.Sub(staticFiles, "static")
	d.mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	d.mux.HandleFunc("GET "+Prefix+"{$}", d.read(d.overview))
	d.mux.HandleFunc("GET "+Prefix+"batches", d.read(d.batches))
	d.mux.HandleFunc("GET "+Prefix+"batches/{id}", d.read(d.batch))
	d.mux.HandleFunc("GET "+Prefix+"jobs", d.read(d.jobs))
	d.mux.HandleFunc("GET "+Prefix+"jobs/{id...}", d.read(d.job))
	d.mux.HandleFunc("POST "+Prefix+"jobs/{id}", d.act)
	d.mux.HandleFunc("GET "+Prefix+"access", d.read(d.access))
	d.mux.HandleFunc("POST "+Prefix+"access/{queue}/{qid}", d.accessAct)
	d.mux.HandleFunc("GET "+Prefix+"search", d.read(d.search))
	d.mux.HandleFunc("GET "+Prefix+"live", d.live)
	d.mux.HandleFunc("GET "+Prefix+"login", d.loginPage)
	d.mux.HandleFunc("POST "+Prefix+"login", d.login)
	d.mux.HandleFunc("POST "+Prefix+"logout", d.logout)
	d.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		r.Pattern = "" // no page: counted as unmatched by the metrics, as the server's other 404s
		d.problem(w, r, api.Caller{}, errNotFound("no page "+r.URL.Path))
	})
}

// ServeHTTP serves a request under Prefix. Changes (POST) from another
// site are refused before anything else.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header() // nosniff is the server's, on every answer (internal/httpd)
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Referrer-Policy", "same-origin")
	if err := d.guard.Check(r); err != nil {
		d.render(w, r, http.StatusForbidden, "error", page{Title: "Refused", Data: errorPage{
			Status: http.StatusForbidden, Message: "refused: a change sent from another site (" + err.Error() + ")"}})
		return
	}
	if r.Method == http.MethodPost {
		if err := readForm(w, r); err != nil {
			d.problem(w, r, api.Caller{}, err)
			return
		}
	}
	d.mux.ServeHTTP(w, r)
}

// maxForm is the largest form read: a button's or the sign-in's fits many
// times over.
const maxForm = 64 << 10

// readForm reads a POST's form, at most maxForm, before any token is
// checked: unbounded, a form took up to 10 MB of memory, and a multipart
// one's files went to temporary files on the server's disk as fast as
// anyone sent them. The pages send urlencoded forms only.
func readForm(w http.ResponseWriter, r *http.Request) error {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		return &pageError{http.StatusUnsupportedMediaType, "a multipart form: the dashboard's buttons send application/x-www-form-urlencoded"}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	err := r.ParseForm()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &pageError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is over %d KiB: a button's form is far smaller", maxForm>>10)}
	case err != nil:
		return errBadInput("the form does not read: " + err.Error())
	}
	return nil
}

// Redirect sends "/" to the dashboard.
func Redirect() http.Handler { return http.RedirectHandler(Prefix, http.StatusFound) }

// tokenCookie carries the browser's token (base64url: a cookie's value
// takes no spaces or semicolons).
const tokenCookie = "ingestq_token"

// token is the token the browser's cookie carries ("" for none).
func token(r *http.Request) string {
	c, err := r.Cookie(tokenCookie)
	if err != nil {
		return ""
	}
	t, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	return string(t)
}

// setToken keeps the token in the browser: HttpOnly (no script reads it),
// SameSite=Strict (no other site's request carries it), Secure over
// HTTPS, for this browser session only.
func setToken(w http.ResponseWriter, r *http.Request, t string) {
	c := &http.Cookie{Name: tokenCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(t)), Path: Prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	if t == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// readPage is a page's handler for a caller allowed to read.
type readPage func(w http.ResponseWriter, r *http.Request, caller api.Caller)

// read lets the caller read, by the API's rules, or shows the sign-in
// page saying why not.
func (d *Dashboard) read(fn readPage) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, err := d.cfg.Tokens.Authorize(token(r), api.RoleRead)
		if err != nil {
			d.signIn(w, r, err)
			return
		}
		fn(w, r, caller)
	}
}

// errorPage is what the error page says.
type errorPage struct {
	Status  int
	Message string
}

// pageError is an error with its status, found by the dashboard itself.
type pageError struct {
	status int
	msg    string
}

func (e *pageError) Error() string { return e.msg }

func errNotFound(msg string) error { return &pageError{http.StatusNotFound, msg} }
func errBadInput(msg string) error { return &pageError{http.StatusBadRequest, msg} }

// statusOf is the status and one-line message of err, as the API would
// answer it.
func statusOf(err error) (int, string) {
	var pe *pageError
	if errors.As(err, &pe) {
		return pe.status, pe.msg
	}
	p := api.ProblemOf(err, ops.Dashboard)
	return p.Status, p.Detail
}

// problem answers with a page that says what went wrong.
func (d *Dashboard) problem(w http.ResponseWriter, r *http.Request, caller api.Caller, err error) {
	status, msg := statusOf(api.ForCaller(err, caller))
	if status >= http.StatusInternalServerError {
		d.cfg.Logger.Warn("dashboard: "+r.Method+" "+r.URL.Path, "status", status, "err", err)
	}
	d.render(w, r, status, "error", page{Title: http.StatusText(status), Caller: caller,
		Data: errorPage{Status: status, Message: msg}})
}

// toldTo is err as caller is told it (api.ForCaller). What that keeps
// from caller goes to the log, which the words caller is told point to.
func (d *Dashboard) toldTo(caller api.Caller, err error, where ...any) error {
	told := api.ForCaller(err, caller)
	if !errors.Is(told, err) { // not !=: that panics on an error of a type == cannot compare
		d.cfg.Logger.Warn("dashboard: a problem told in short to a read token, in full", append(where, "err", err)...)
	}
	return told
}

// page is what every page's template gets.
type page struct {
	Title  string
	Caller api.Caller
	Tokens bool   // the daemon has tokens: there is signing in
	Flash  *flash // an action's outcome, above the live part
	Live   bool   // the page follows the changes (not the sign-in page: it could not)
	Data   any
}

// flash is an action's outcome.
type flash struct {
	OK      bool
	Message string
}

// render writes a page: whole, or only its live part when the page's
// script asks (X-Live).
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Tokens = d.cfg.Tokens.Len() > 0
	p.Live = name != "login"
	t := d.pages[name]
	root := "layout"
	if r.Header.Get("X-Live") == "1" {
		root = "main"
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, root, p); err != nil {
		d.cfg.Logger.Error("dashboard: render "+name, "err", err)
		http.Error(w, "the page could not be made: "+err.Error(), http.StatusInternalServerError)
		return
	}
	out := b.Bytes()
	if p.Caller.Role < api.RoleAdmin {
		out = hidePaths(out, d.cfg.Ops.Q.Root()) // as the API's answers: only an admin sees the server's paths
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusServiceUnavailable { // ZooKeeper out of reach (api.ProblemOf): the API's Retry-After
		api.SetRetryAfter(w.Header())
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}
