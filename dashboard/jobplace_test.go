package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A finished job's page says that no step is to come, and a Held one's
// what holds it; the page said of both that it "waits in no queue", its
// ETA "unknown", which a new user read as a job stuck somewhere.
func TestJobPageOfAFinishedJobSaysNoStepIsToCome(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-place")
	done := b.job(bt, queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing, queue.Storing,
		queue.Recording, queue.Notify, queue.Completed)
	failed := b.job(bt, queue.Estimating, queue.Failed)
	held := b.job(bt, queue.Held)
	pending := b.job(bt)
	b.get("", "/ui/jobs/"+done).is(t, http.StatusOK, "none: it is Completed, no step is to come", "<dt>ETA</dt><dd>none: it is Completed</dd>")
	b.get("", "/ui/jobs/"+failed).is(t, http.StatusOK, "none: it is Failed, no step is to come unless it is requeued")
	b.get("", "/ui/jobs/"+held).is(t, http.StatusOK, "none: it is Held, no daemon takes it until it is released")
	b.get("", "/ui/jobs/"+pending).is(t, http.StatusOK, "1 of 1 in Pending")
	for _, jid := range []string{done, failed, held, pending} {
		if page := b.get("", "/ui/jobs/"+jid).body; strings.Contains(page, "waits in no queue") {
			t.Errorf("job %s's page still says it waits in no queue", jid)
		}
	}
}
