package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The access page lists both queues' requests with what each asks for and
// where its package is; a Failed one is requeued from its button, by an
// operator, and deleted only by an admin, as the API allows.
func TestAccessPageListsAndActs(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	token := func(ark string, version int, files ...string) map[string]any {
		return queue.AccessToken{Token: "t-" + ark, ARK: ark, Version: version, Files: files, Format: queue.FormatZip,
			TokenStatus: queue.TokenNotReady, ContentBytes: 3 << 20, RequestedBy: "depositor@example.org"}.Map(nil)
	}
	small, err := b.q.CreateAccess(ctx, queue.AccessSmall, token("ark:/99999/fk4small", 2))
	must(t, err)
	large, err := b.q.CreateAccess(ctx, queue.AccessLarge, token("ark:/99999/fk4large", 0, "a.txt", "b.txt"))
	must(t, err)
	got, _, err := b.q.AcquireAccessWork(ctx, queue.AccessLarge, nil)
	must(t, err)
	must(t, b.q.MoveAccess(ctx, got, queue.Processing, "", nil))
	must(t, b.q.MoveAccess(ctx, got, queue.Failed, "object ark:/99999/fk4large has no file b.txt", nil))
	ref := queue.AccessLarge + "/" + large.ID

	b.get(readToken, "/ui/access").is(t, http.StatusOK, "ark:/99999/fk4small", "version 2, zip", "~3.1 MB",
		"depositor@example.org", "ark:/99999/fk4large", "2 file(s), zip", "has no file b.txt", `data-ref="`+ref+`"`)
	// The overview counts them per queue, from the moves' events (a daemon's).
	b.accessMoved(queue.AccessSmall+"/"+small.ID, queue.Pending)
	b.accessMoved(ref, queue.Failed)
	b.waitOverview(t, `<a href="/ui/access?state=Pending"><span class="state pending">Pending</span></a></td><td class="num">1</td><td class="num">0</td>`)
	b.waitOverview(t, `<a href="/ui/access?state=Failed"><span class="state failed">Failed</span></a></td><td class="num">0</td><td class="num">1</td>`)
	b.get(readToken, "/ui/access?state=failed").is(t, http.StatusOK, "fk4large")
	if a := b.get(readToken, "/ui/access?state=failed"); strings.Contains(a.body, "fk4small") {
		t.Errorf("the Failed filter shows a Pending request:\n%s", a.body)
	}
	b.get(readToken, "/ui/access?state=Sleeping").is(t, http.StatusBadRequest, `unknown access state "Sleeping"`)

	requeue, del := url.Values{"action": {"requeue"}}, url.Values{"action": {"delete"}}
	b.post(readToken, "/ui/access/"+ref, requeue).is(t, http.StatusForbidden, "needs operate")
	b.post(operateToken, "/ui/access/"+ref, del).is(t, http.StatusForbidden, "needs admin")
	b.post(operateToken, "/ui/access/"+ref, url.Values{"action": {"explode"}}).is(t, http.StatusBadRequest, "want requeue or delete")
	b.post(operateToken, "/ui/access/small/qid0000009999", requeue).is(t, http.StatusNotFound, "qid0000009999")
	b.post(operateToken, "/ui/access/"+ref, requeue).is(t, http.StatusOK, "access request "+ref+" requeued")
	if a, err := b.q.FindAccess(ctx, ref); err != nil || a.State() != queue.Processing {
		t.Fatalf("after requeue: %v, %v; want Processing", a, err)
	}
	// Requeued, it is no longer Failed: the state machine's refusal.
	b.post(operateToken, "/ui/access/"+ref, requeue).is(t, http.StatusConflict, "refused:")
}

// An access request that was made and is no more answers 410 on the
// access page's buttons, saying who deleted it and when, where the events
// recorded it; one nothing is known of stays 404.
func TestRemovedAccessRequestAnswersGone(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	ref, a := b.processing("ark:/99999/fk4gone")
	must(t, b.q.MoveAccess(ctx, a, queue.Failed, "storage has no such object", nil))
	del := url.Values{"action": {"delete"}}
	b.post(adminToken, "/ui/access/"+ref, del).is(t, http.StatusOK, "access request "+ref+" is Deleted")
	b.post(adminToken, "/ui/access/"+ref, del).is(t, http.StatusOK, "access request "+ref+" removed")
	must(t, b.bus.Flush(ctx))
	b.post(operateToken, "/ui/access/"+ref, url.Values{"action": {"requeue"}}).is(t, http.StatusGone,
		"refused: access request "+ref+" was deleted by admin token at ", `ask again with POST /api/v1/access {"ark": ARK}`)
	b.post(adminToken, "/ui/access/"+ref, del).is(t, http.StatusGone, "refused: access request "+ref+" was deleted by admin token at ")
	b.post(adminToken, "/ui/access/small/qid0000009999", del).is(t, http.StatusNotFound, "qid0000009999")
}

// A request being assembled names the host assembling it.
func TestAccessPageNamesTheHostAssembling(t *testing.T) {
	b := setup(t)
	must(t, b.q.RegisterHost(t.Context(), "h1", nil)) // the test's queue works as the daemon of host h1
	b.processing("ark:/99999/fk4who")
	b.get(readToken, "/ui/access").is(t, http.StatusOK, "(assembling on h1)")
}

// processing requests ark and moves the request to Processing, as a
// daemon does (the test's queue takes it), and returns its ref and view.
func (b *bundle) processing(ark string) (string, *queue.Access) {
	b.t.Helper()
	ref := b.request(ark, time.Now())
	return ref, queuetest.TakeAccess(b.t, b.q, ref)
}
