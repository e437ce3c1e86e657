package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A foreign writer's batch or job caught mid-creation (its node without
// its status yet) gets a page that says it is being created, 503 with
// Retry-After; one it broke a 409 naming node and reason. Both were 500s.
func TestItemPagesOfForeignHalfItems(t *testing.T) {
	b := setup(t, noTokens)
	conn := zktest.Connect(t)
	for _, kind := range []string{"batches", "jobs"} {
		p, err := conn.Create(b.q.Path("/"+kind+"/"+kind[:1]+"id"), nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		must(t, err)
		id := p[len(b.q.Path("/"+kind+"/")):]
		a := b.get("", "/ui/"+kind+"/"+id)
		a.is(t, http.StatusServiceUnavailable, id+"/status", "being created by another program")
		if a.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: no Retry-After", kind, id)
		}
	}
	jid := b.job(b.batch("uuid-broken"))
	_, err := conn.Set(b.q.Path("/jobs/"+jid+"/status"), []byte(`{"status": `), -1)
	must(t, err)
	b.get("", "/ui/jobs/"+jid).is(t, http.StatusConflict, jid+"/status: bad JSON")
}
