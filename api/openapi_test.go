package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/api"
)

// openAPIDoc is the part of the OpenAPI document the tests read.
type openAPIDoc struct {
	OpenAPI string                                 `json:"openapi"`
	Paths   map[string]map[string]openAPIOperation `json:"paths"`
}

type openAPIOperation struct {
	OperationID string         `json:"operationId"`
	Role        string         `json:"x-ingestq-role"`
	Parameters  []openAPIParam `json:"parameters"`
	Responses   map[string]any `json:"responses"`
}

type openAPIParam struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

// The OpenAPI document describes every route registered on the mux, with
// the role it needs and its path parameters, and no route that is not.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var doc openAPIDoc
	must(t, json.Unmarshal(api.OpenAPI(), &doc))
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q, want 3.x", doc.OpenAPI)
	}
	documented := map[string]openAPIOperation{}
	ids := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = op
			if op.OperationID == "" || ids[op.OperationID] {
				t.Errorf("%s %s: operationId %q missing or used twice", method, path, op.OperationID)
			}
			ids[op.OperationID] = true
		}
	}
	rest := regexp.MustCompile(`\{(\w+)\.\.\.\}`) // {ark...} is {ark} in OpenAPI
	registered := map[string]bool{}
	for _, r := range b.api.Routes() {
		key := r.Method + " " + strings.TrimSuffix(api.Prefix, "/") + rest.ReplaceAllString(r.Path, "{$1}")
		registered[key] = true
		op, ok := documented[key]
		if !ok {
			t.Errorf("route %s is not in the OpenAPI document", key)
			continue
		}
		if op.Role != r.Role.String() {
			t.Errorf("%s: the document says role %q, the route needs %q", key, op.Role, r.Role)
		}
		for _, name := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(key, -1) {
			if !slices.Contains(op.Parameters, openAPIParam{Name: name[1], In: "path"}) {
				t.Errorf("%s: path parameter %s is not declared", key, name[1])
			}
		}
		if len(op.Responses) == 0 {
			t.Errorf("%s: no responses", key)
		}
	}
	for key := range documented {
		if !registered[key] {
			t.Errorf("the OpenAPI document has %s, which no route serves", key)
		}
	}
	if len(registered) < 25 {
		t.Errorf("%d routes: fewer than the API has", len(registered))
	}
	// It is served, without a token, as JSON.
	a := b.do("GET", "openapi.json", "", nil)
	a.ok(t, http.StatusOK, nil)
	if string(a.body) != string(api.OpenAPI()) {
		t.Error("the served document is not the embedded one")
	}
}
