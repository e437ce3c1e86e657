package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/api"
)

// envelope is the keys every listing answers, in the order they are named.
var envelope = []string{"items", "next", "problems"}

// Every listing answers one envelope: {"items": [...], "next": cursor or
// null, "problems": [...]}, and the OpenAPI document says so of each. A
// listing that is always whole (holds, hosts, access requests, profiles) has next
// null. The event stream is server-sent events, not a listing.
func TestListsAnswerOneEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bt := b.batch("uuid-envelope", "demo")
	b.batch("uuid-envelope-2", "demo")
	b.job(bt.ID, 5, 0)
	b.job(bt.ID, 5, 0)
	b.do("PUT", "holds/queues/ingest", adminToken, nil).ok(t, http.StatusOK, nil)
	must(t, b.q.RegisterHost(t.Context(), "ingest1", []byte(`{"version": "v9"}`)))
	must(t, b.q.RegisterHost(t.Context(), "foreign", []byte("not json")))

	listings := map[string]struct {
		items    int  // how many the fixture above makes
		next     bool // a cursor on this page (limit=1 where the listing pages)
		problems int
	}{
		"batches?limit=1": {items: 1, next: true},
		"jobs?limit=1":    {items: 1, next: true},
		"access":          {},
		"holds":           {items: 1},
		"hosts":           {items: 2, problems: 1},
		"profiles":        {},
	}
	for path, want := range listings {
		a := b.do("GET", path, readToken, nil)
		a.ok(t, http.StatusOK, nil)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(a.body, &got); err != nil {
			t.Errorf("GET %s: %s: not an object: %v", path, a.body, err)
			continue
		}
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, envelope) {
			t.Errorf("GET %s: keys %v, want %v", path, keys, envelope)
			continue
		}
		var items []json.RawMessage
		var problems []string
		var next *string
		if json.Unmarshal(got["items"], &items) != nil || json.Unmarshal(got["problems"], &problems) != nil ||
			json.Unmarshal(got["next"], &next) != nil {
			t.Errorf("GET %s: %s; want items and problems arrays, next a string or null", path, got)
			continue
		}
		if len(items) != want.items || (next != nil) != want.next || len(problems) != want.problems {
			t.Errorf("GET %s: %d items, next %v, problems %q; want %d, a cursor %v, %d problems",
				path, len(items), next, problems, want.items, want.next, want.problems)
		}
		if next != nil {
			after := path[:strings.Index(path, "?")] + "?limit=1&after=" + *next
			var page struct{ Items []json.RawMessage }
			if b.do("GET", after, readToken, nil).ok(t, http.StatusOK, &page); len(page.Items) != 1 {
				t.Errorf("GET %s: %d items, want the next page's one", after, len(page.Items))
			}
		}
	}

	// The document: each listing's answer is a page schema of the three.
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string                  `json:"required"`
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	must(t, json.Unmarshal(api.OpenAPI(), &doc))
	for path := range listings {
		route := "/api/v1/" + strings.TrimSuffix(path, "?limit=1")
		ref := doc.Paths[route]["get"].Responses["200"].Content["application/json"].Schema.Ref
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		schema := doc.Components.Schemas[name]
		if !ok || !slices.Equal(slices.Sorted(maps.Keys(schema.Properties)), envelope) ||
			!slices.Equal(slices.Sorted(slices.Values(schema.Required)), envelope) {
			t.Errorf("GET %s: the document's answer %q has properties %v, required %v; want the envelope %v",
				route, ref, slices.Sorted(maps.Keys(schema.Properties)), schema.Required, envelope)
		}
	}
}
