package api_test

import (
	"net/http"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// An item a foreign writer is creating (its node without its status yet:
// mrt-zk writes them one by one) is answered 503 with Retry-After and says
// it is being created; it was a 500 "corrupt", a server fault for a
// moment's state.
func TestItemBeingCreatedIsUnavailableForAMoment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn := zktest.Connect(t)
	half := func(folder, prefix string) string {
		p, err := conn.Create(b.q.Path(folder+prefix), nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		must(t, err)
		return p[len(b.q.Path(folder)):]
	}
	for _, item := range []string{"batches/" + half("/batches/", "bid"), "jobs/" + half("/jobs/", "jid"),
		"access/small/" + half("/access/small/", "qid")} {
		a := b.do("GET", item, readToken, nil)
		a.problem(t, http.StatusServiceUnavailable, "being-created", item+"/status", "being created by another program")
		if got := a.header.Get("Retry-After"); got != "10" {
			t.Errorf("%s: Retry-After %q, want 10", item, got)
		}
	}
}
