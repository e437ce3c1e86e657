package dashboard

import (
	"net/http"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// accessPage lists a page of the access requests of both queues, newest
// first.
type accessPage struct {
	State    string
	States   []queue.State // the filter's choices
	Rows     []ops.AccessView
	Pages    pager
	Problems []string
}

func (d *Dashboard) access(w http.ResponseWriter, r *http.Request, caller api.Caller) {
	d.showAccess(w, r, caller, http.StatusOK, nil)
}

// showAccess renders the access page with an action's outcome, if any.
func (d *Dashboard) showAccess(w http.ResponseWriter, r *http.Request, caller api.Caller, status int, f *flash) {
	v := r.URL.Query()
	p := accessPage{State: v.Get("state"), States: queue.AccessMachine.States}
	var st queue.State
	if p.State != "" {
		var err error
		if st, err = ops.ParseAccessState(p.State); err != nil {
			d.problem(w, r, caller, err)
			return
		}
	}
	list, next, problems, err := d.cfg.Ops.AccessPage(r.Context(), st, v.Get("after"), accessPerPage)
	if err != nil {
		d.problem(w, r, caller, err)
		return
	}
	p.Rows, p.Pages, p.Problems = list, pagesOf(Prefix+"access", v, next), texts(problems)
	d.render(w, r, status, "access", page{Title: "Access requests", Caller: caller, Flash: f, Data: p})
}

// accessAct runs a request's button (requeue, or delete for an admin)
// through the service layer, by the API's roles. A request made and no
// more to be had is gone (410), as in the API.
func (d *Dashboard) accessAct(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("queue") + "/" + r.PathValue("qid")
	need, do := api.RoleOperate, d.cfg.Ops.RequeueAccess
	switch r.PostFormValue("action") {
	case "requeue":
	case "delete":
		need, do = api.RoleAdmin, d.cfg.Ops.DeleteAccess
	default:
		do = nil
	}
	caller, err := d.cfg.Tokens.Authorize(token(r), need)
	if err == nil && do == nil {
		err = errBadInput("action: want requeue or delete")
	}
	var o ops.Outcome
	if err == nil {
		if o, err = do(ops.WithActor(r.Context(), caller.Name), ref); err != nil {
			err = d.cfg.Ops.AccessGone(r.Context(), ref, ops.AccessView{}, err)
		}
	}
	if caller, status, f, ok := d.afterAction(w, r, o, err); ok {
		d.showAccess(w, r, caller, status, f)
	}
}
