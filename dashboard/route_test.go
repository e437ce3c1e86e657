package dashboard_test

import (
	"net/http"
	"testing"
	"time"
)

// A request for no page under /ui/ is counted by the metrics as unmatched,
// as the server's other 404s, not under a route "/ui/" with no method; a
// page is counted under its own route.
func TestNoPageIsUnmatched(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seen := make(chan string, 4)
	b.web.Observe(func(pattern string, code int, _ time.Duration) { seen <- pattern })
	for _, c := range []struct{ path, want string }{{"/ui/no-such-page", ""}, {"/ui/batches", "GET /ui/batches"}} {
		resp, err := http.Get(b.base + c.path)
		must(t, err)
		resp.Body.Close()
		if got := <-seen; got != c.want {
			t.Errorf("%s: route %q, want %q", c.path, got, c.want)
		}
	}
}
