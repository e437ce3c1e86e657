package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/handlers/inventory"
)

// objectCommand prints what the inventory knows of one object: its
// versions with their files, the copies of each, and the PREMIS events of
// its ingest. It reads the inventory, not the queue.
func (a *app) objectCommand() *cobra.Command {
	var src objectFlags
	var prof string
	cmd := &cobra.Command{
		Use:   "object ARK | object --profile P LOCALID",
		Short: "Show a stored object from the inventory: versions, files, copies and PREMIS events",
		Long: "object reads the inventory a daemon records into, the first of: --inventory (a postgres:// URL,\n" +
			"an http(s) inventory service, or a bbolt file); the embedded one in --data-dir, when given (while\n" +
			"its daemon runs, which holds it, or when there is none, the daemon's HTTP API at --api answers);\n" +
			"else the daemon's API at --api (default " + defaultAPI + "). The default data folder's\n" +
			"inventory is read only when --data-dir (or " + EnvDataDir + ") names it: it may be another queue's.\n" +
			"A file is opened read-only. The output names the inventory read.\n" +
			"A local id names an object within its profile (collection), so it needs --profile.",
		Args: args("ARK|LOCALID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src.given(cmd, a.getenv)
			h, done, err := a.objectSource(ctx, src)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			defer done()
			id := args[0]
			var d inventory.ObjectDetail
			switch {
			case strings.HasPrefix(id, "ark:"):
				d, err = h.Object(ctx, id)
			case prof == "":
				return usagef("object: %q is not an ARK; a local id needs --profile (it is unique within its profile)", id)
			default:
				d, err = h.ObjectByLocalID(ctx, prof, id)
			}
			if errors.Is(err, inventory.ErrNotFound) {
				return &exitError{code: 1, err: fmt.Errorf("no object %s in the inventory %s", id, h.name)}
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			d = d.Shown()
			if a.json() {
				return a.writeJSON(struct {
					Inventory string `json:"inventory"`
					inventory.ObjectDetail
				}{h.name, d})
			}
			a.println("inventory: %s\n", h.name)
			a.printObject(d)
			return nil
		},
	}
	fl := cmd.Flags()
	a.objectFlagSet(fl, &src, "the inventory to read")
	fl.StringVar(&prof, "profile", "", "the profile (collection) a local id belongs to")
	return cmd
}

// printObject writes an object's detail as text, newest version first.
func (a *app) printObject(d inventory.ObjectDetail) {
	o := d.Object
	a.println("%s  profile %s, %d version(s)", o.ARK, o.Profile, o.LatestVersion)
	if len(o.LocalIDs) > 0 {
		a.println("  local ids: %s", strings.Join(o.LocalIDs, "; "))
	}
	if o.What != "" || o.Who != "" {
		a.println("  what: %s  who: %s  when: %s", textValue(o.What, "-"), textValue(o.Who, "-"), textValue(o.When, "-"))
	}
	for i := len(d.Versions) - 1; i >= 0; i-- {
		v := d.Versions[i]
		a.println("\nversion %d  created %s  from batch %s, job %s", v.Version, when(v.Created), v.Batch, v.Job)
		a.println("  files (%d):", len(v.Files))
		for _, f := range v.Files {
			a.println("    %-40s %12d  sha256 %s", f.Name, f.Size, f.SHA256)
		}
		a.println("  copies (%d):", len(v.Replicas))
		for _, r := range v.Replicas {
			a.println("    %s  verified %s  (%s)", r.URL, when(r.Verified), r.Target)
		}
		if last := lastFixityCheck(v.Events); len(last) > 0 {
			failed := 0
			for _, e := range last {
				if e.Outcome != inventory.OutcomeSuccess {
					failed++
				}
			}
			outcome := inventory.OutcomeSuccess
			if failed > 0 {
				outcome = fmt.Sprintf("%s (%d of %s)", inventory.OutcomeFailure, failed, plural(len(last), "check"))
			}
			a.println("  last fixity check: %s, %s, by %s:", when(last[0].At), outcome, last[0].Agent)
			for _, e := range last {
				a.println("    %-7s %s", e.Outcome, e.Detail)
			}
		}
		a.println("  PREMIS events (%d):", len(v.Events))
		for _, e := range v.Events {
			about := ""
			if e.File != "" {
				about = " [" + e.File + "]"
			}
			a.println("    %s  %-27s %-7s %s%s", when(e.At), e.Type, e.Outcome, e.Detail, about)
		}
	}
}

// lastFixityCheck are the fixity check events of the latest time among
// evs: an audit gives its checks of one object at every target one time.
func lastFixityCheck(evs []inventory.Event) []inventory.Event {
	var last []inventory.Event
	for _, e := range evs {
		switch {
		case e.Type != inventory.EventFixityCheck:
		case len(last) == 0 || e.At.After(last[0].At):
			last = []inventory.Event{e}
		case e.At.Equal(last[0].At):
			last = append(last, e)
		}
	}
	return last
}
