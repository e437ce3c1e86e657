package dashboard_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/dashboard"
)

// With ZooKeeper out of reach a page answers 503 and says when to ask
// again, as the API does (decision 543 (g): neither did).
func TestUnreachableZooKeeperPageSaysWhenToAskAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.zkGone = true })
	a := b.get(readToken, dashboard.Prefix+"batches")
	a.is(t, http.StatusServiceUnavailable)
	if got := a.header.Get("Retry-After"); got != strconv.Itoa(api.RetryAfterSeconds) {
		t.Errorf("Retry-After %q, want %d", got, api.RetryAfterSeconds)
	}
}
