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

// Removed lists, by their keys in a job's detail, the values of an ended
// job's nodes (Completed or Deleted) that name its working folder or a
// hand-off URL into it: the daemon that holds the folder removes it, and
// with it what those URLs served, as soon as the job ends, whoever ended
// it, or at its next start if it was down then (decisions 263, 286).
// Empty unless the job has ended; a URL another program's step wrote, and
// the stored copies, are not in it.
func Removed(j *queue.Job) []string {
	removed := []string{}
	if !handlers.Ended(j.State()) {
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

// WorkGone says in words what became of an ended job's working folder:
// removed by the daemon on the host that holds it (the configuration's
// working_host; none with a working area every host mounts) when the job
// ended, or at that daemon's next start if it was down then.
func WorkGone(j *queue.Job) string {
	if h := j.Config.WorkingHost; h != "" {
		return "removed when the job ended, by the daemon on " + h + " (at its next start if it was down)"
	}
	return "removed when the job ended (at the next start of a daemon if none was running)"
}

func manifestURL(m *queue.StepManifest) string {
	if m == nil {
		return ""
	}
	return m.ManifestURL
}
