package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The profiles the daemons have published: what a depositor needs to
// fill a submission. Addresses (callbacks, notify) and back ends are for
// admin tokens only.
func (a *API) profileRoutes() {
	a.handle("GET", "/profiles", RoleRead, a.listProfiles)
	a.handle("GET", "/profiles/{name}", RoleRead, a.getProfile)
}

// profileView is a profile as the API gives it. Every token sees the
// first part; an admin token sees the addresses and back ends too, any
// password in their URLs masked.
type profileView struct {
	Name           string             `json:"name"` // the collection: POST /batches's profile, and a collection hold's name
	Description    string             `json:"description"`
	Priority       int                `json:"priority"` // a submission's default priority (0..99, lower first)
	NAAN           string             `json:"naan"`     // minted ARKs are ark:/NAAN/SHOULDER…
	Shoulder       string             `json:"shoulder"`
	PayloadTypes   []string           `json:"payload_types"`   // POST /batches's type
	PayloadSchemes []string           `json:"payload_schemes"` // of payload_url
	HashAlgorithms []string           `json:"hash_algorithms"` // hash_algorithm, and a manifest's
	LargeJobs      []profile.SizeRule `json:"large_jobs"`      // a job needing more than over bytes gets at least priority
	HasCallback    bool               `json:"has_callback"`    // each finished job is POSTed to a callback
	HasNotify      bool               `json:"has_notify"`      // each batch report is e-mailed
	// each batch report is POSTed to a report callback
	HasReportCallback bool `json:"has_report_callback"`

	// Admin tokens only.
	Callback       string   `json:"callback,omitempty"`
	ReportCallback string   `json:"report_callback,omitempty"`
	Notify         []string `json:"notify,omitempty"`
	Storage        string   `json:"storage,omitempty"`
	Inventory      string   `json:"inventory,omitempty"`
	Access         string   `json:"access,omitempty"`
}

func newProfileView(p *profile.Profile, c Caller) profileView {
	v := profileView{Name: p.Name, Description: p.Description, Priority: p.Priority, NAAN: p.NAAN, Shoulder: p.Shoulder,
		PayloadTypes: ops.PayloadTypes, PayloadSchemes: ops.PayloadSchemes(p), HashAlgorithms: checkm.HashAlgorithmNames(),
		LargeJobs: p.LargeJobs, HasCallback: p.Callback != "", HasNotify: len(p.Notify) > 0, HasReportCallback: p.ReportCallback != ""}
	if v.LargeJobs == nil {
		v.LargeJobs = []profile.SizeRule{}
	}
	if c.Role >= RoleAdmin {
		v.Callback, v.ReportCallback, v.Notify = redact.Location(p.Callback), redact.Location(p.ReportCallback), p.Notify
		v.Inventory, v.Access = redact.Location(p.Inventory), redact.Location(p.Access)
		v.Storage = redact.Location(strings.Join(handlers.ParseTargets(p.Storage), ","))
	}
	return v
}

func (a *API) listProfiles(w http.ResponseWriter, r *http.Request, c Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	profiles, problems, err := a.cfg.Ops.Profiles(r.Context())
	if err != nil {
		return err
	}
	views := make([]profileView, 0, len(profiles))
	for _, p := range profiles {
		if c.Sees(p.Name) {
			views = append(views, newProfileView(p, c))
		}
	}
	writeJSON(w, http.StatusOK, newPage(views, "", problems))
	return nil
}

func (a *API) getProfile(w http.ResponseWriter, r *http.Request, c Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	name := r.PathValue("name")
	p, err := a.cfg.Ops.Profile(r.Context(), name)
	if c.Scoped() && (err == nil && !c.Sees(name) || errors.Is(err, queue.ErrNotFound)) {
		return a.cfg.Ops.MissingProfile(r.Context(), name, c.Sees) // naming only the caller's
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newProfileView(p, c))
	return nil
}
