package ops

import (
	"slices"
	"strings"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/reactor/queue"
)

// InWorkArea tells whether s, a path or URL, is in the job's working
// folder: a hand-off URL of the daemon's (<advertise>/work/<jid>/…), or
// the folder itself or a file: URL in it.
func InWorkArea(j *queue.Job, s string) bool {
	if strings.Contains(s, handlers.HandoffPrefix+j.ID+"/") {
		return true
	}
	dir := strings.TrimSuffix(j.Config.WorkingDir, "/")
	s = strings.TrimPrefix(s, "file://")
	return dir != "" && (s == dir || strings.HasPrefix(s, dir+"/"))
}

// Removed lists, by their keys in a job's detail, the values of a
// Completed job's nodes that name its working folder or a hand-off URL
// into it: Notify removed the folder, and with it what those URLs served
// (decision 263). Empty unless the job is Completed; a URL another
// program's step wrote, and the stored copies, are not in it.
func Removed(j *queue.Job) []string {
	removed := []string{}
	if j.State() != queue.Completed {
		return removed
	}
	for key, s := range map[string]string{"configuration.working_dir": j.Config.WorkingDir,
		"store.manifest_url": manifestURL(j.Store), "inventory.manifest_url": manifestURL(j.Inventory)} {
		if s != "" && InWorkArea(j, s) {
			removed = append(removed, key)
		}
	}
	slices.Sort(removed)
	return removed
}

func manifestURL(m *queue.StepManifest) string {
	if m == nil {
		return ""
	}
	return m.ManifestURL
}
