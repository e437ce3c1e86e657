package dashboard

import (
	"cmp"
	"net/http"
	"slices"
	"sort"
	"strings"

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
	list, problems, err := d.cfg.Ops.ListAccess(r.Context(), st)
	if err != nil {
		d.problem(w, r, caller, err)
		return
	}
	// Each queue numbers its own requests: order by when they were asked.
	// A page starts after the request after names: when it was asked, and
	// its ref.
	newer := func(a, b ops.AccessView) int {
		return cmp.Or(strings.Compare(b.Token.Requested, a.Token.Requested), strings.Compare(b.Ref, a.Ref))
	}
	slices.SortFunc(list, newer)
	if after := v.Get("after"); after != "" {
		var last ops.AccessView
		last.Token.Requested, last.Ref, _ = strings.Cut(after, " ")
		list = list[sort.Search(len(list), func(i int) bool { return newer(last, list[i]) < 0 }):]
	}
	next := ""
	if len(list) > accessPerPage {
		list = list[:accessPerPage]
		next = list[accessPerPage-1].Token.Requested + " " + list[accessPerPage-1].Ref
	}
	p.Rows, p.Pages, p.Problems = list, pagesOf(Prefix+"access", v, next), texts(problems)
	d.render(w, r, status, "access", page{Title: "Access requests", Caller: caller, Flash: f, Data: p})
}

// accessAct runs a request's button (requeue, or delete for an admin)
// through the service layer, by the API's roles.
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
		o, err = do(ops.WithActor(r.Context(), caller.Name), ref)
	}
	if caller, status, f, ok := d.afterAction(w, r, o, err); ok {
		d.showAccess(w, r, caller, status, f)
	}
}
