package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/api"
)

// What a depositor's integration met on a walk through a real daemon with
// an operate token, checked here on the real server.

// A batch's uuid names one batch. Given again (a retry after a lost
// answer), the 409 names the batch that has it and how to read it, in the
// API's words (it said "batchID …", the queue node's key). A uuid that
// could not name its batch is a 400 naming the field, and makes no batch:
// one in the form of a bid (GET /batches/{id} answered another batch for
// it) or a jid (refused there), and one ZooKeeper takes as no node's name
// (a 500 before, "zk: invalid path").
func TestSubmissionUUIDNamesItsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publishDemo()
	submit := func(uuid string) answer {
		t.Helper()
		return b.do("POST", "batches", operateToken, map[string]any{"payload_url": "https://example.org/x.zip", "profile": "demo", "uuid": uuid})
	}
	var first struct{ BID string }
	submit("uni-0001").ok(t, http.StatusCreated, &first)
	p := submit("uni-0001").problem(t, http.StatusConflict, "refused",
		`uuid "uni-0001" is batch `+first.BID+"'s", "GET /api/v1/batches/"+first.BID+" shows it")
	if strings.Contains(p.Detail, "batchID") {
		t.Errorf("detail %q names the queue's key, not the field", p.Detail)
	}

	for uuid, want := range map[string]string{
		first.BID:                "has the form of a bid or jid",
		"bid0000000999":          "has the form of a bid or jid",
		"jid0000000001":          "has the form of a bid or jid",
		".":                      "not a name ZooKeeper takes",
		"..":                     "not a name ZooKeeper takes",
		"a\x01b":                 "holds U+0001",
		"a\u007fb":               "holds U+007F",
		"x\ue000":                "holds U+E000",
		"x😀":                     "holds U+1F600",
		"a/b":                    "must not contain '/'",
		strings.Repeat("é", 257): "257 characters: want at most 256",
	} {
		submit(uuid).problem(t, http.StatusBadRequest, "invalid", "uuid "+strconv.Quote(uuid)+": "+want)
	}
	if ids, err := b.q.BatchIDs(t.Context()); err != nil || len(ids) != 1 {
		t.Fatalf("refused uuids made batches: %v %v", ids, err)
	}

	// Merritt's bid-… uuids, and any other name ZooKeeper takes, are
	// uuids: each finds its batch.
	for _, uuid := range []string{"bid-5f0c2a7e", "Dépôt 2026", strings.Repeat("é", 256)} {
		var got struct{ BID string }
		submit(uuid).ok(t, http.StatusCreated, &got)
		var st struct{ BID, UUID string }
		b.do("GET", "batches/"+pathEscape(uuid), operateToken, nil).ok(t, http.StatusOK, &st)
		if st.BID != got.BID || st.UUID != uuid {
			t.Errorf("GET /batches/%s: %+v, want %s", uuid, st, got.BID)
		}
	}
}

// pathEscape escapes s as one path segment.
func pathEscape(s string) string {
	return strings.NewReplacer("%", "%25", " ", "%20", "/", "%2F", "?", "%3F", "#", "%23").Replace(s)
}

// A body's media type is read as RFC 9110 says: its name in any case, with
// parameters; another type whose name starts application/json is not
// JSON (application/jsonx was taken, Application/JSON refused).
func TestBodyMediaTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.publishDemo()
	body := `{"payload_url": "https://example.org/x.zip", "profile": "demo"}`
	for _, ct := range []string{"application/json", "Application/JSON", "application/json; charset=UTF-8", "APPLICATION/JSON;charset=utf-8"} {
		b.doAs("POST", "batches", operateToken, ct, body).ok(t, http.StatusCreated, nil)
	}
	for _, ct := range []string{"application/jsonx", "application/json-patch+json", "text/json", "application/json; charset"} {
		b.doAs("POST", "batches", operateToken, ct, body).problem(t, http.StatusUnsupportedMediaType, "unsupported-media-type",
			"body of type "+strconv.Quote(ct)+": want application/json")
	}
}

// With ZooKeeper out of reach, an operation that needs it answers 503,
// as the README says, and its operation in the OpenAPI document lists 503
// (only the objects', the access request's and the events' did): a
// client made from the document expects it. Each answer is one its
// operation lists. Each 503 for ZooKeeper out of reach says when to ask
// again (Retry-After), as the document's Unavailable response says
// (decision 543 (g): none did); the one for no inventory does not.
func TestUnreachableZooKeeperIsListed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.zkGone = true })
	var doc openAPIDoc
	must(t, json.Unmarshal(api.OpenAPI(), &doc))
	// What takes each operation past its checks of the request to the queue.
	bodies := map[string]any{
		"POST /api/v1/batches":         map[string]any{"payload_url": "https://example.org/x.zip", "profile": "demo"},
		"POST /api/v1/jobs/actions":    map[string]any{"action": "hold", "filter": map[string]string{"state": "pending"}},
		"POST /api/v1/jobs/{jid}/fail": map[string]any{},
		"POST /api/v1/access":          map[string]any{"ark": "ark:/99999/fk4none"},
	}
	queries := map[string]string{"GET /api/v1/events": "?batch=bid0000000001"}
	queue := strings.NewReplacer("{name}", "ingest") // a queue's name, where pathParams gives a collection's
	unavailable := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := strings.ToUpper(method) + " " + path
			target := path
			if strings.HasPrefix(path, "/api/v1/holds/queues/") {
				target = queue.Replace(path)
			}
			a := b.do(strings.ToUpper(method), pathParams.Replace(target)+queries[key], adminToken, bodies[key])
			if a.status == http.StatusServiceUnavailable {
				unavailable++
				// This daemon has no inventory: that 503 cannot pass, and says no when.
				want := strconv.Itoa(api.RetryAfterSeconds)
				if strings.Contains(string(a.body), "this daemon has no inventory") {
					want = ""
				}
				if got := a.header.Get("Retry-After"); got != want {
					t.Errorf("%s answers 503 with Retry-After %q, want %q: %s", key, got, want, a.body)
				}
			}
			if _, ok := op.Responses[strconv.Itoa(a.status)]; !ok {
				t.Errorf("%s answers %d with ZooKeeper out of reach, which its operation does not list: %s", key, a.status, a.body)
			}
		}
	}
	if unavailable < 25 {
		t.Errorf("%d operations answered 503 with ZooKeeper out of reach: fewer than need it", unavailable)
	}
}

// A depositor follows its access request by its ref, as a batch by its
// bid: a ref that neither the queue nor the recorded events know (a typo
// of its qid) is a 404 naming it, as a batch or job never made is (it was
// an endless empty stream); the request just made streams its events.
func TestEventStreamOfAnUnknownAccessRequest(t *testing.T) {
	t.Parallel()
	const ark = "ark:/99999/fk4follow"
	b := setup(t, withObject(t, ark, 3))
	var req struct{ Ref string }
	b.do("POST", "access", operateToken, map[string]any{"ark": ark}).ok(t, http.StatusCreated, &req)
	b.do("GET", "events?access=small/qid9999999999", readToken, nil).problem(t, http.StatusNotFound, "not-found",
		"access request small/qid9999999999: no such access request (this queue has not made it)")
	b.do("GET", "events?access=qid9999999999", readToken, nil).problem(t, http.StatusNotFound, "not-found",
		"access request qid9999999999: no such access request (this queue has not made it)")
	s := b.openStream("since=1h&access=" + req.Ref)
	if ev := s.next(t); ev.AccessID != req.Ref || ev.To != "Pending" {
		t.Errorf("the stream of %s: %+v, want its → Pending", req.Ref, ev)
	}
}
