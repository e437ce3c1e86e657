package dashboard

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// maxQuery is the longest search taken.
const maxQuery = 512

// searchPage is what a search found: the stored objects (from the
// inventory), the jobs of the queue whose object it names, and the batch
// whose uuid it is.
type searchPage struct {
	Query       string
	ByARK       bool
	Objects     []inventory.ObjectDetail
	Table       jobTable
	Batch       *queue.Batch
	NoInventory bool
	Problems    []string
}

// search finds what an ARK (ark:/…), a local id or a batch uuid names; a
// jid or a bid goes to its page.
func (d *Dashboard) search(w http.ResponseWriter, r *http.Request, caller api.Caller) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if err := checkQuery(q); err != nil {
		d.problem(w, r, caller, err)
		return
	}
	for prefix, path := range map[string]string{"jid": "jobs/", "bid": "batches/"} {
		if isID(q, prefix) {
			http.Redirect(w, r, Prefix+path+q, http.StatusFound)
			return
		}
	}
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	p := searchPage{Query: q, ByARK: strings.HasPrefix(q, "ark:"), NoInventory: d.cfg.Inventory == nil}
	jobs, err := d.jobsNaming(ctx, q, p.ByARK)
	if err != nil {
		d.problem(w, r, caller, err)
		return
	}
	p.Table = jobTable{Rows: d.cfg.Ops.Rows(ctx, jobs, ops.Dashboard)}
	p.Objects, p.Problems = d.objectsNamed(ctx, caller, q, p.ByARK, jobs)
	if !strings.Contains(q, "/") {
		if b, err := d.cfg.Ops.Q.FindBatch(ctx, q); err == nil {
			p.Batch = b
		} else if !errors.Is(err, queue.ErrNotFound) {
			p.Problems = append(p.Problems, "batch uuid: "+err.Error())
		}
	}
	d.render(w, r, http.StatusOK, "search", page{Title: "Search", Caller: caller, Data: p})
}

// checkQuery refuses a search that can name nothing.
func checkQuery(q string) error {
	switch {
	case q == "":
		return errBadInput("search: type an ARK (ark:/NAAN/NAME), a local id, a batch uuid, a job id (jid…) or a batch id (bid…)")
	case len(q) > maxQuery:
		return errBadInput("search: over " + strconv.Itoa(maxQuery) + " bytes; no identifier is that long")
	case !utf8.ValidString(q) || strings.ContainsAny(q, "\x00\r\n"):
		return errBadInput("search: not a line of text")
	}
	return nil
}

// isID tells whether s is prefix followed by digits (jid…, bid…).
func isID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// jobsNaming reads the jobs whose object has the ARK, or the local id: the
// identifiers of every job (one read each), then the jobs that match.
func (d *Dashboard) jobsNaming(ctx context.Context, id string, byARK bool) ([]*queue.Job, error) {
	q := d.cfg.Ops.Q
	jids, err := q.JobIDs(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := q.Identifiers(ctx, jids)
	if err != nil {
		return nil, err
	}
	var out []*queue.Job
	for _, jid := range jids {
		x := ids[jid]
		if x == nil || byARK && x.PrimaryID != id || !byARK && !slices.Contains(x.LocalIDs, id) {
			continue
		}
		j, err := q.LoadJob(ctx, jid)
		if errors.Is(err, queue.ErrNotFound) {
			continue // gone since
		}
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// objectsNamed asks the inventory for the object of the ARK, or of the
// local id in each profile it may be in (the published ones, and those of
// the jobs found), its problems as caller may see them.
func (d *Dashboard) objectsNamed(ctx context.Context, caller api.Caller, id string, byARK bool, jobs []*queue.Job) ([]inventory.ObjectDetail, []string) {
	inv := d.cfg.Inventory
	if inv == nil {
		return nil, nil
	}
	var out []inventory.ObjectDetail
	var problems []string
	take := func(o inventory.ObjectDetail, err error) {
		switch {
		case err == nil:
			out = append(out, o.Shown())
		case !errors.Is(err, inventory.ErrNotFound):
			problems = append(problems, d.toldTo(caller, err, "search", id).Error())
		}
	}
	if byARK {
		take(inv.Object(ctx, id))
		return out, problems
	}
	profiles, err := profile.Published(ctx, d.cfg.Ops.Q)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, j := range jobs {
		if !slices.Contains(profiles, j.Profile()) && j.Profile() != "" {
			profiles = append(profiles, j.Profile())
		}
	}
	for _, prof := range profiles {
		take(inventory.ObjectByLocalID(ctx, inv, prof, id))
	}
	return out, problems
}
