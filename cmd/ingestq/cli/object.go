package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/handlers/inventory"
)

// objectCommand prints what the inventory knows of one object: its
// versions with their files, the copies of each, and the PREMIS events of
// its ingest. It reads the inventory, not the queue.
func (a *app) objectCommand() *cobra.Command {
	var inv, dataDir, prof, api string
	cmd := &cobra.Command{
		Use:   "object ARK | object --profile P LOCALID",
		Short: "Show a stored object from the inventory: versions, files, copies and PREMIS events",
		Long: "object reads the inventory a daemon records into: --inventory (a postgres:// URL, an http(s)\n" +
			"inventory service, or a bbolt file), by default the embedded one in --data-dir. The embedded\n" +
			"inventory is one process's at a time: while its daemon runs (or on a host without it), the\n" +
			"daemon's HTTP API at --api answers instead.\n" +
			"A local id names an object within its profile (collection), so it needs --profile.",
		Args: args("ARK|LOCALID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			h, done, err := a.objectSource(ctx, inv, dataDir, api)
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
				return &exitError{code: 1, err: fmt.Errorf("no object %s in the inventory: %w", id, err)}
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if a.json() {
				return a.writeJSON(d)
			}
			a.printObject(d)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&inv, "inventory", a.env(EnvInventory, ""), "the inventory to read (env "+EnvInventory+"; default: the embedded one in --data-dir)")
	fl.StringVar(&dataDir, "data-dir", a.env(EnvDataDir, defaultDataDir(a.getenv)), "the daemon's data folder (env "+EnvDataDir+")")
	fl.StringVar(&prof, "profile", "", "the profile (collection) a local id belongs to")
	fl.StringVar(&api, "api", a.env(EnvAPI, defaultAPI), apiFlagHelp)
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
		a.println("\nversion %d  created %s  from batch %s, job %s", v.Version, v.Created.Format(time.RFC3339), v.Batch, v.Job)
		a.println("  files (%d):", len(v.Files))
		for _, f := range v.Files {
			a.println("    %-40s %12d  sha256 %s", f.Name, f.Size, f.SHA256)
		}
		a.println("  copies (%d):", len(v.Replicas))
		for _, r := range v.Replicas {
			a.println("    %s  verified %s  (%s)", r.URL, r.Verified.Format(time.RFC3339), r.Target)
		}
		a.println("  PREMIS events (%d):", len(v.Events))
		for _, e := range v.Events {
			about := ""
			if e.File != "" {
				about = " [" + e.File + "]"
			}
			a.println("    %s  %-27s %-7s %s%s", e.At.Format(time.RFC3339), e.Type, e.Outcome, e.Detail, about)
		}
	}
}
