package cli_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// show JID gives a job's working folder and the hand-off URLs served from
// it while the job is under way; once it is Completed the folder is
// removed, and show says so where it gave them, rather than URLs that
// answer 404. The stored copies, which outlive it, are still given, and
// -o json keeps what the nodes hold.
func TestShowCompletedJobSaysItsWorkingFolderIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const dir = "/var/lib/ingestq/work/"
	store := "http://ingest1:8080/work/" + f.p1 + "/storage-manifest"
	inventory := "http://ingest1:8080/work/" + f.p1 + "/inventory-manifest"
	copyURL := "file:///var/lib/ingestq/ocfl/abc/v1/inventory.json"
	f.moveJob(f.p1, "", queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing)
	j, err := f.q.LockJob(t.Context(), f.p1)
	f.ok(err)
	cfg := j.Config
	cfg.WorkingDir, cfg.WorkingHost = dir+f.p1, "ingest1"
	f.ok(f.q.SetJobStatus(t.Context(), j, queue.Storing, queue.JobChange{Config: &cfg, Release: true,
		Store: &queue.StepManifest{ManifestURL: store, Mode: "add"}}))
	j, err = f.q.LockJob(t.Context(), f.p1)
	f.ok(err)
	f.ok(f.q.SetJobStatus(t.Context(), j, queue.Recording, queue.JobChange{Release: true,
		Store:     &queue.StepManifest{ManifestURL: store, Mode: "add", Copies: []string{copyURL}},
		Inventory: &queue.StepManifest{ManifestURL: inventory, Mode: "add"}}))
	f.moveJob(f.p1, "", queue.Notify)

	show := func() map[string]string {
		t.Helper()
		out, _, code := f.run("show", f.p1)
		wantCode(t, code, 0)
		lines := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^([a-z_.]+): +(.*)$`).FindAllStringSubmatch(out, -1) {
			lines[m[1]] = m[2]
		}
		return lines
	}
	want := map[string]string{"configuration.working_dir": dir + f.p1, "configuration.working_host": "ingest1",
		"store.manifest_url": store, "inventory.manifest_url": inventory, "store.copies": copyURL}
	got := show()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("show of a job in Notify: %s %q, want %q", k, got[k], v)
		}
	}

	f.moveJob(f.p1, "", queue.Completed)
	for _, k := range []string{"configuration.working_dir", "store.manifest_url", "inventory.manifest_url"} {
		want[k] = "removed when the job ended, by the daemon on ingest1 (at its next start if it was down)"
	}
	got = show()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("show of a Completed job: %s %q, want %q", k, got[k], v)
		}
	}

	out, _, code := f.run("show", f.p1, "-o", "json")
	wantCode(t, code, 0)
	var nodes struct {
		Configuration struct {
			WorkingDir string `json:"working_dir"`
		} `json:"configuration"`
		Store, Inventory queue.StepManifest
	}
	f.ok(json.Unmarshal([]byte(out), &nodes))
	if nodes.Configuration.WorkingDir != dir+f.p1 || nodes.Store.ManifestURL != store || nodes.Inventory.ManifestURL != inventory ||
		len(nodes.Store.Copies) != 1 {
		t.Errorf("show -o json of a Completed job changed what its nodes hold:\n%s", out)
	}
}
