package dashboard_test

import (
	"net/http"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/dashboard"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/pgtest"
)

// With ZooKeeper out of reach a page answers 503 and says when to ask
// again, as the API does (decision 543 (g): neither did). It names the
// queue's folder it could not list to a read user too: ZooKeeper's, not
// a server path (it said "list [server path hidden]: …").
func TestUnreachableZooKeeperPageSaysWhenToAskAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.zkGone = true })
	a := b.get(readToken, dashboard.Prefix+"batches")
	a.is(t, http.StatusServiceUnavailable, "list /batches: zk: connection closed")
	if got := a.header.Get("Retry-After"); got != strconv.Itoa(api.RetryAfterSeconds) {
		t.Errorf("Retry-After %q, want %d", got, api.RetryAfterSeconds)
	}
}

// A search with the inventory out of reach (a real PostgreSQL, stopped)
// tells a read token only that it is out of reach, and the daemon's log
// which database, as the page says; an operate token is told which
// database (a read token was told its host, port, name and user).
func TestInventoryOutOfReachNamedToOperatorsOnly(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	url := pgtest.NewDatabase(t, s)
	db := path.Base(strings.TrimSuffix(url, "?sslmode=disable"))
	inv, err := inventory.NewPostgres(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	b := setup(t, func(o *options) { o.inventory = inv })
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	search := dashboard.Prefix + "search?q=ark:/99999/fk4none"
	read := b.get(readToken, search)
	read.is(t, http.StatusOK, "the inventory is out of reach")
	if strings.Contains(read.body, db) || strings.Contains(read.body, strconv.Itoa(s.Port)) {
		t.Errorf("a read token's search names the database %s or its port %d:\n%s", db, s.Port, read.body)
	}
	if b.log.Lines(db) == nil { // the page says the log names it
		t.Errorf("the daemon's log does not name the database %s:\n%s", db, b.log.String())
	}
	b.get(operateToken, search).is(t, http.StatusOK, "inventory database postgres://127.0.0.1:"+strconv.Itoa(s.Port)+"/"+db)
}
