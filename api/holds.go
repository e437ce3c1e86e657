package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/ops"
)

// Holds (of queues and collections, and the Held batches and jobs), the daemons (hosts) and the stored
// objects (from the inventory).
func (a *API) holdRoutes() {
	a.handle("GET", "/holds", RoleRead, forbidScoped(a.listHolds))
	a.handle("PUT", "/holds/queues/{name}", RoleAdmin, a.hold(false, true))
	a.handle("DELETE", "/holds/queues/{name}", RoleAdmin, a.hold(false, false))
	a.handle("PUT", "/holds/collections/{name}", RoleAdmin, a.hold(true, true))
	a.handle("DELETE", "/holds/collections/{name}", RoleAdmin, a.hold(true, false))
	a.handle("GET", "/hosts", RoleRead, forbidScoped(a.hosts))
	a.handle("GET", "/objects", RoleRead, a.objectByLocalID)
	a.handle("GET", "/objects/{ark...}", RoleRead, a.objectByARK)
}

func (a *API) listHolds(w http.ResponseWriter, r *http.Request, _ Caller) error {
	v, err := readQuery(r, "limit", "after")
	if err != nil {
		return err
	}
	p, err := pageOf(v)
	if err != nil {
		return err
	}
	if !refCursor.MatchString(p.After) {
		if err := checkCursor(p.After, bidCursor, "a bid, or a Held job's ref PP-jid…"); err != nil {
			return err
		}
	}
	items, next, problems, err := a.cfg.Ops.HeldItems(r.Context(), ops.HTTP, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newPage(items, next, problems))
	return nil
}

// hold sets (set) or lifts a hold of a collection or a queue. Holding a
// collection no daemon has published a profile for takes ?force=true.
func (a *API) hold(collection, set bool) handler {
	return func(w http.ResponseWriter, r *http.Request, _ Caller) error {
		var known []string
		if collection && set {
			known = append(known, "force")
		}
		v, err := readQuery(r, known...)
		if err != nil {
			return err
		}
		force, err := boolParam(v, "force")
		if err != nil {
			return err
		}
		name, s := r.PathValue("name"), a.cfg.Ops
		var o ops.Outcome
		switch {
		case collection && set:
			o, err = s.HoldCollection(r.Context(), name, force)
		case collection:
			o, err = s.ReleaseCollection(r.Context(), name)
		case set:
			o, err = s.HoldQueue(r.Context(), name)
		default:
			o, err = s.ReleaseQueue(r.Context(), name)
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, apiOutcome(o))
		return nil
	}
}

// hosts lists the daemons; a host node another program wrote is listed
// by name, and named in problems.
func (a *API) hosts(w http.ResponseWriter, r *http.Request, _ Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	hosts, problems, err := a.cfg.Ops.Hosts(r.Context())
	if err != nil {
		return err
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = fmt.Errorf("host %s: not an ingestq daemon's node: %w", p.Name, p.Err)
	}
	writeJSON(w, http.StatusOK, newPage(hosts, "", errs))
	return nil
}

// objectByARK answers what the inventory holds of an object: its versions,
// files, copies and PREMIS events.
func (a *API) objectByARK(w http.ResponseWriter, r *http.Request, caller Caller) error {
	if _, err := readQuery(r); err != nil {
		return err
	}
	ark := r.PathValue("ark")
	if !strings.HasPrefix(ark, "ark:") {
		return badRequest("%q is not an ARK (want ark:/NAAN/NAME; a local id goes in ?profile=&local_id=)", ark)
	}
	inv, err := a.inventory()
	if err != nil {
		return err
	}
	d, err := inv.Object(r.Context(), ark)
	if err != nil {
		return err
	}
	if !caller.Sees(d.Object.Profile) {
		return missingObject(ark)
	}
	writeJSON(w, http.StatusOK, d.Shown())
	return nil
}

// objectByLocalID is objectByARK for the object a local id names within
// its profile.
func (a *API) objectByLocalID(w http.ResponseWriter, r *http.Request, caller Caller) error {
	v, err := readQuery(r, "profile", "local_id")
	if err != nil {
		return err
	}
	prof, id := v.Get("profile"), v.Get("local_id")
	if prof == "" || id == "" {
		return badRequest("want ?profile=P&local_id=ID (a local id is unique within its profile); an ARK goes in the path")
	}
	inv, err := a.inventory()
	if err != nil {
		return err
	}
	if !caller.Sees(prof) { // the inventory's words for a local id it does not know
		return fmt.Errorf("inventory: local id %q in profile %q: %w", id, prof, inventory.ErrNotFound)
	}
	d, err := inventory.ObjectByLocalID(r.Context(), inv, prof, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d.Shown())
	return nil
}

func (a *API) inventory() (inventory.Inventory, error) {
	if a.cfg.Inventory == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, kind: "unavailable", lacks: true,
			msg: "this daemon has no inventory (its pipeline is passthrough)"}
	}
	return a.cfg.Inventory, nil
}
