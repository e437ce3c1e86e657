package handlers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A local id already in the inventory makes a deposit an update of that
// object: the same ARK, a new version only when the content changed. A
// depositor's ARK that disagrees with the local id's fails the job.
func TestUpdateByLocalID(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	deposit := func(path string, data []byte, extra ...string) *queue.Job {
		t.Helper()
		b := r.submit(r.content.put(path, data), append([]string{"local_id", "thesis-42"}, extra...)...)
		r.waitBatch(b.ID, queue.Completed, queue.Failed)
		return r.jobsOf(b.ID)["file"]
	}
	first := deposit("/v1/thesis.txt", []byte("draft"))
	ark := r.checkStored(first, object{"thesis.txt": []byte("draft")})

	again := deposit("/v1/thesis.txt", []byte("draft"))
	if got := r.checkStored(again, object{"thesis.txt": []byte("draft")}); got != ark || again.Store.Mode != "update" {
		t.Fatalf("same content again: %s (mode %s), want %s as an update", got, again.Store.Mode, ark)
	}
	v1, _ := r.p.Primary().Latest(context.Background(), ark)
	if v1.Number != 1 {
		t.Errorf("same content made version %d, want 1", v1.Number)
	}

	changed := deposit("/v2/thesis.txt", []byte("final"))
	if got := r.checkStored(changed, object{"thesis.txt": []byte("final")}); got != ark {
		t.Fatalf("changed content: %s, want %s", got, ark)
	}
	if v, _ := r.p.Primary().Latest(context.Background(), ark); v.Number != 2 {
		t.Errorf("changed content made version %d, want 2", v.Number)
	}
	// v2 holds only content v1 does not: OCFL deduplicates by digest.
	had := map[string]bool{}
	for _, f := range v1.Files {
		had[f.SHA256] = true
	}
	written := r.versionContent(ark, 2)
	if len(written) == 0 || len(written) >= len(v1.Files) {
		t.Errorf("v2 wrote %d files (%v), want fewer than v1's %d and at least the changed one", len(written), written, len(v1.Files))
	}
	for name, sum := range written {
		if had[sum] {
			t.Errorf("v2 wrote %s again although v1 holds its content", name)
		}
	}

	wrong := deposit("/v3/thesis.txt", []byte("other"), "primary_id", "ark:/99999/fk4000bbbbx")
	if wrong.State() != queue.Failed || !strings.HasPrefix(wrong.Status.Message, "Processing: identifier mismatch") ||
		!strings.Contains(wrong.Status.Message, ark) || !strings.Contains(wrong.Status.Message, "ark:/99999/fk4000bbbbx") {
		t.Fatalf("mismatching ARK: job %s %q, want Failed naming both ARKs", wrong.State(), wrong.Status.Message)
	}
	if v, _ := r.p.Primary().Latest(context.Background(), ark); v.Number != 2 {
		t.Errorf("a failed deposit changed storage: version %d", v.Number)
	}
}
