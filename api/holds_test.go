package api_test

import (
	"encoding/json"
	"net/http"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Queue and collection holds are set, listed and lifted; holding what is
// held is no error; an unknown queue is 400, a collection no daemon has
// published a profile for is refused unless forced.
func TestHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publishDemo()
	var o ops.Outcome
	b.do("PUT", "holds/queues/ingest", adminToken, nil).ok(t, http.StatusOK, &o)
	if !o.Changed || o.Message != "queue ingest held: no new step of any batch or job starts (steps under way finish) until DELETE /api/v1/holds/queues/ingest" {
		t.Fatalf("hold queue: %+v", o)
	}
	b.do("PUT", "holds/queues/ingest", adminToken, nil).ok(t, http.StatusOK, &o)
	if o.Changed || o.Message != "queue ingest was already held: DELETE /api/v1/holds/queues/ingest releases it" {
		t.Fatalf("hold queue again: %+v", o)
	}
	b.do("PUT", "holds/collections/demo", adminToken, nil).ok(t, http.StatusOK, &o)
	b.do("PUT", "holds/collections/typo", adminToken, nil).problem(t, 409, "refused", `no profile "typo" is published on this queue (published: demo)`)
	b.do("PUT", "holds/collections/later?force=true", adminToken, nil).ok(t, http.StatusOK, &o)
	b.do("PUT", "holds/queues/elsewhere", adminToken, nil).problem(t, 400, "invalid", `queue "elsewhere": want one of ingest, accessSmall, accessLarge`)
	b.do("DELETE", "holds/queues/ingest?force=true", adminToken, nil).problem(t, 400, "invalid", `query parameter "force"`)
	var page struct{ Items []ops.HeldItem }
	b.do("GET", "holds", readToken, nil).ok(t, http.StatusOK, &page)
	holds := page.Items
	if len(holds) != 3 || holds[0].Kind != "queue" || holds[0].Name != "ingest" || holds[0].Since == nil ||
		holds[0].Effect != "no new step of any batch or job starts (steps under way finish)" ||
		holds[0].Release != "DELETE /api/v1/holds/queues/ingest" || holds[1].Release != "DELETE /api/v1/holds/collections/demo" ||
		holds[1].Name != "demo" || holds[2].Name != "later" || time.Since(*holds[0].Since) > time.Minute {
		t.Fatalf("holds %+v", holds)
	}
	b.do("DELETE", "holds/collections/demo", adminToken, nil).ok(t, http.StatusOK, &o)
	if o.Message != "collection demo released: its new batches and jobs go ahead; those it sent to Held stay Held "+
		"(GET /api/v1/holds lists them, each with its release)" {
		t.Fatalf("release collection: %+v", o)
	}
	b.do("DELETE", "holds/queues/ingest", adminToken, nil).ok(t, http.StatusOK, &o)
	b.do("DELETE", "holds/queues/ingest", adminToken, nil).ok(t, http.StatusOK, &o)
	if o.Changed || o.Message != "queue ingest was not held" {
		t.Fatalf("release queue twice: %+v", o)
	}
	b.do("GET", "holds", readToken, nil).ok(t, http.StatusOK, &page)
	if holds = page.Items; len(holds) != 1 || holds[0].Name != "later" {
		t.Fatalf("holds after the releases: %+v", holds)
	}
}

// GET /holds is paged as the other listings are (?limit=, ?after=, next):
// a held collection's window of 5,000 Held jobs was one answer of 1.2 MB
// that took 14 s to read. The queue and collection holds come on the
// first page; a cursor of another listing is a 400.
func TestHoldsArePaged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var o ops.Outcome
	b.do("PUT", "holds/queues/ingest", adminToken, nil).ok(t, http.StatusOK, &o)
	bid := b.batch("uuid-held-page", "demo").ID
	var want []string
	for range 3 {
		want = append(want, b.job(bid, 5, 0, queue.Held))
	}
	var got []string
	url, pages := "holds?limit=2", 0
	for ; url != "" && pages < 4; pages++ {
		var page struct {
			Items []ops.HeldItem
			Next  *string
		}
		b.do("GET", url, readToken, nil).ok(t, http.StatusOK, &page)
		url = ""
		if page.Next != nil {
			url = "holds?limit=2&after=" + *page.Next
		}
		for _, it := range page.Items {
			if it.Kind == "job" {
				got = append(got, it.Name)
			}
		}
		if queueHold := len(page.Items) > 0 && page.Items[0].Kind == "queue"; queueHold != (pages == 0) || len(page.Items) > 3 {
			t.Errorf("page %d: %+v; want the queue hold on the first page alone, and at most 2 jobs", pages+1, page.Items)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") || pages != 2 {
		t.Errorf("Held jobs listed %v in %d pages; want %v in 2", got, pages, want)
	}
	b.do("GET", "holds?after=jid0000000001", readToken, nil).problem(t, 400, "invalid", `query parameter "after"`)
}

// The hosts are the daemons' host nodes; another program's node is listed
// by name, with a problem.
func TestHosts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	info, err := json.Marshal(reactor.HostInfo{Version: "v9", PID: 42, States: []string{"Pending"}, JobsInHand: 3})
	must(t, err)
	must(t, b.q.RegisterHost(t.Context(), "ingest1", info))
	must(t, b.q.RegisterHost(t.Context(), "foreign", []byte("not json")))
	var out struct {
		Items    []reactor.HostInfo
		Problems []string
	}
	b.do("GET", "hosts", readToken, nil).ok(t, http.StatusOK, &out)
	if len(out.Items) != 2 || out.Items[0].Name != "foreign" || out.Items[1].Name != "ingest1" ||
		out.Items[1].Version != "v9" || out.Items[1].JobsInHand != 3 || len(out.Problems) != 1 {
		t.Fatalf("hosts %+v", out)
	}
}

// An object is read from the inventory by ARK or by profile and local id;
// an unknown one is 404; a daemon without an inventory says so (503), with
// no Retry-After: asking again cannot give it one.
func TestObjects(t *testing.T) {
	t.Parallel()
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	rec := inventory.Record{ARK: "ark:/99999/fk4obj", Profile: "demo", LocalIDs: []string{"my-local"}, Version: 1,
		Created: time.Now().UTC().Truncate(time.Second), Batch: "bid0000000001", Job: "jid0000000001", What: "A title",
		Files: []inventory.FileRow{{Name: "a.txt", Size: 3, SHA256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}},
		// A storage service's password stays in the record (Storing matches
		// copies by it) and is masked in what the API answers.
		Replicas: []inventory.Replica{{Target: "http://ingest:s3cret@storage.example.org/s",
			URL: "http://ingest:s3cret@storage.example.org/s/objects/ark:%2F99999%2Ffk4obj", Verified: time.Now().UTC().Truncate(time.Second)}},
		Events: []inventory.Event{{ID: "0b0e3b7a-6a8e-4c61-9a3c-3f1d1f3c7e01", Type: inventory.EventReplication, At: time.Now().UTC().Truncate(time.Second),
			Outcome: "success", Agent: "ingestq", Detail: "copy 1 of 1: version 1 at http://ingest:s3cret@storage.example.org/s/objects/ark:%2F99999%2Ffk4obj"}}}
	must(t, inv.Record(t.Context(), rec))
	b := setup(t, func(o *options) { o.inventory = inv })
	var d inventory.ObjectDetail
	byARK := b.do("GET", "objects/ark:/99999/fk4obj", readToken, nil)
	byARK.ok(t, http.StatusOK, &d)
	if d.Object.ARK != rec.ARK || len(d.Versions) != 1 || d.Versions[0].Files[0].Name != "a.txt" {
		t.Fatalf("by ARK: %+v", d)
	}
	if c := d.Versions[0].Replicas; len(c) != 1 || c[0].Target != "http://ingest:xxxxx@storage.example.org/s" || strings.Contains(string(byARK.body), "s3cret") {
		t.Errorf("by ARK: %s; want each copy's password masked, in its events too", byARK.body)
	}
	byLocalID := b.do("GET", "objects?profile=demo&local_id=my-local", readToken, nil)
	byLocalID.ok(t, http.StatusOK, &d)
	if d.Object.ARK != rec.ARK || strings.Contains(string(byLocalID.body), "s3cret") {
		t.Fatalf("by local id: %s", byLocalID.body)
	}
	b.do("GET", "objects/ark:/99999/fk4none", readToken, nil).problem(t, 404, "not-found", "ark:/99999/fk4none")
	b.do("GET", "objects?profile=demo&local_id=nope", readToken, nil).problem(t, 404, "not-found", "nope")
	b.do("GET", "objects?local_id=my-local", readToken, nil).problem(t, 400, "invalid", "profile")
	b.do("GET", "objects/my-local", readToken, nil).problem(t, 400, "invalid", "not an ARK")

	none := setup(t)
	noInventory := none.do("GET", "objects/ark:/99999/fk4obj", readToken, nil)
	noInventory.problem(t, 503, "unavailable", "no inventory")
	if got := noInventory.header.Get("Retry-After"); got != "" {
		t.Errorf("a daemon without an inventory answers Retry-After %q, want none", got)
	}
}

// An inventory database out of reach is a 503 that says when to ask again,
// as the README says (it was a 500, "internal": a client could not tell it
// from a bug); a real PostgreSQL, stopped. An operate token is told which
// database (its password masked); a read token, or a token scoped to
// profiles, only that the inventory is out of reach (it was told the host,
// port, database and user too).
func TestInventoryOutOfReachIsUnavailable(t *testing.T) {
	t.Parallel()
	s := pgtest.Start(t)
	url := strings.Replace(pgtest.NewDatabase(t, s), "postgres://postgres@", "postgres://postgres:s3cret@", 1) // trust: any password will do
	db := path.Base(strings.TrimSuffix(url, "?sslmode=disable"))
	inv, err := inventory.NewPostgres(t.Context(), url)
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	b := setup(t, func(o *options) { o.inventory = inv }, withDepositors)
	b.do("GET", "objects/ark:/99999/fk4obj", readToken, nil).problem(t, 404, "not-found")
	must(t, s.Stop())
	for _, c := range []struct {
		token string
		says  []string
		not   []string
	}{
		{readToken, []string{"the inventory is out of reach"}, []string{db, strconv.Itoa(s.Port), "postgres", "s3cret"}},
		{operateToken, []string{"inventory database postgres://127.0.0.1:" + strconv.Itoa(s.Port) + "/" + db}, []string{"s3cret"}},
		// A scoped operate token is a depositor's: told as a read token is.
		{alphaToken, []string{"the inventory is out of reach"}, []string{db, strconv.Itoa(s.Port), "postgres", "s3cret"}},
	} {
		a := b.do("GET", "objects/ark:/99999/fk4obj", c.token, nil)
		p := a.problem(t, 503, "unavailable", c.says...)
		for _, not := range c.not {
			if strings.Contains(p.Detail, not) {
				t.Errorf("%s is told %q, which names %q", c.token, p.Detail, not)
			}
		}
		if got := a.header.Get("Retry-After"); got != strconv.Itoa(api.RetryAfterSeconds) {
			t.Errorf("Retry-After %q, want %d", got, api.RetryAfterSeconds)
		}
	}
}
