package dashboard

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// keepAlive is how often a quiet live stream sends a comment, so that
// proxies keep the connection.
const keepAlive = 15 * time.Second

// live streams the notices of change to an open page (server-sent events,
// "event: change" with what changed) until it closes or the daemon stops.
func (d *Dashboard) live(w http.ResponseWriter, r *http.Request) {
	if _, err := d.cfg.Tokens.Authorize(token(r), api.RoleRead); err != nil {
		status, msg := statusOf(err)
		http.Error(w, msg, status)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "this connection cannot stream", http.StatusInternalServerError)
		return
	}
	notices, unsubscribe := d.hub.subscribe()
	defer unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": ingestq dashboard\n\n")
	flusher.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var err error
		select {
		case topic, ok := <-notices:
			if !ok {
				return // the dashboard closed
			}
			_, err = fmt.Fprintf(w, "event: change\ndata: %s\n\n", topic)
		case <-tick.C:
			_, err = io.WriteString(w, ": keep-alive\n\n")
		case <-r.Context().Done():
			return
		case <-d.ctx.Done():
			return
		}
		if err != nil {
			return // the page went away
		}
		flusher.Flush()
	}
}

// Action is a button of a job's page.
type Action struct {
	Name  string // ops.JobActions
	Label string
	Admin bool // needs the admin role
}

// actionsFor lists the actions the job state machine allows from s, in
// the order the page shows them.
func actionsFor(jid string, s queue.State) []Action {
	m := queue.JobMachine
	var out []Action
	add := func(ok bool, a Action) {
		if ok {
			out = append(out, a)
		}
	}
	add(m.Check(jid, s, queue.Held) == nil, Action{Name: "hold", Label: "Hold"})
	add(s == queue.Held && m.Check(jid, s, queue.Pending) == nil, Action{Name: "release", Label: "Release"})
	add(s == queue.Failed, Action{Name: "requeue", Label: "Requeue"})
	add(m.Check(jid, s, queue.Failed) == nil, Action{Name: "fail", Label: "Fail"})
	add(m.Check(jid, s, queue.Deleted) == nil, Action{Name: "delete", Label: "Delete", Admin: true})
	return out
}

// act runs a job's action from its page's button (a form: action, and a
// message for fail) through the service layer, by the API's roles, and
// shows the job's page with the outcome or the refusal.
func (d *Dashboard) act(w http.ResponseWriter, r *http.Request) {
	jid := r.PathValue("id")
	name := r.PostFormValue("action")
	act := ops.JobAction{Name: name}
	if name == "fail" {
		act.Message = strings.TrimSpace(r.PostFormValue("message"))
	}
	caller, err := d.cfg.Tokens.Authorize(token(r), api.RoleOperate)
	if err == nil {
		err = act.Check()
	}
	if err == nil {
		err = api.Allowed(caller, act)
	}
	var o ops.Outcome
	if err == nil {
		o, err = d.cfg.Ops.Do(ops.WithActor(r.Context(), caller.Name), act, jid)
	}
	if caller, status, f, ok := d.afterAction(w, r, o, err); ok {
		d.showJob(w, r, caller, jid, status, f)
	}
}

// afterAction turns an action's outcome or refusal into the flash above
// the page shown next, with its status, and the caller that may read it.
// ok is false when the caller may not read: the sign-in form is shown
// instead, saying why.
func (d *Dashboard) afterAction(w http.ResponseWriter, r *http.Request, o ops.Outcome, err error) (api.Caller, int, *flash, bool) {
	f := &flash{OK: err == nil, Message: o.For(ops.Dashboard).Message}
	status := http.StatusOK
	if err != nil {
		status, f.Message = statusOf(err)
		f.Message = "refused: " + f.Message
	}
	caller, rerr := d.cfg.Tokens.Authorize(token(r), api.RoleRead)
	if rerr != nil { // then the action was refused too, saying why
		d.signIn(w, r, cmp.Or(err, rerr))
		return caller, status, f, false
	}
	return caller, status, f, true
}

// signIn shows the sign-in form, saying why it is needed.
func (d *Dashboard) signIn(w http.ResponseWriter, r *http.Request, why error) {
	status, msg := statusOf(why)
	next := r.URL.RequestURI()
	if r.Method != http.MethodGet || next == Prefix+"login" {
		next = Prefix
	}
	d.render(w, r, status, "login", page{Title: "Sign in", Data: loginPage{Message: msg, Next: next}})
}

// loginPage is what the sign-in page says.
type loginPage struct {
	Message string
	Next    string // where to go once signed in
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	caller, _ := d.cfg.Tokens.Authorize(token(r), api.RoleRead)
	msg := "Give a token from the daemon's --api-tokens file (read, operate or admin)."
	if d.cfg.Tokens.Len() == 0 {
		msg = "This daemon has no tokens: reading is open and changes are refused (see serve --api-tokens)."
	}
	d.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Caller: caller, Data: loginPage{Message: msg, Next: safeNext(r.URL.Query().Get("next"))}})
}

// login checks the token given in the form and keeps it in a cookie.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	t := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	if _, err := d.cfg.Tokens.Authorize(t, api.RoleRead); err != nil || d.cfg.Tokens.Len() == 0 {
		if err == nil {
			err = errBadInput("this daemon has no tokens: there is nothing to sign in with (see serve --api-tokens)")
		}
		status, msg := statusOf(err)
		d.render(w, r, status, "login", page{Title: "Sign in", Data: loginPage{Message: msg, Next: next}})
		return
	}
	setToken(w, r, t)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	setToken(w, r, "")
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// safeNext keeps a place to go after signing in only if it is a page of
// the dashboard (never another site), its path read as a browser reads it:
// dot segments, %2e for a dot among them, must not lead out of Prefix, and
// a backslash is a slash. url.Parse refuses control characters (\r, \n, and
// the tab a browser drops). The fragment is dropped: http.Redirect cleans
// all before the query as one path, so its dot segments would count.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || !strings.HasPrefix(next, Prefix) || strings.Contains(u.Path, "\\") ||
		!strings.HasPrefix(path.Clean(u.Path)+"/", Prefix) {
		return Prefix
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
