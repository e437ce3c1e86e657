package api

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ingestq/ingestq/ops"
)

// Paging: a page holds DefaultLimit items unless ?limit= says otherwise,
// MaxLimit at most.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// readQuery reads r's query, refusing a parameter not in known (a typo
// would otherwise select everything) or given twice.
func readQuery(r *http.Request, known ...string) (url.Values, error) {
	return readQueryRepeating(r, nil, known...)
}

// readQueryRepeating is readQuery where the parameters in repeating (also
// in known) may be given more than once.
func readQueryRepeating(r *http.Request, repeating []string, known ...string) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("query: %v", err)
	}
	for name, vals := range v {
		if !slices.Contains(known, name) {
			if len(known) == 0 {
				return nil, badRequest("query parameter %q: this takes none", name)
			}
			return nil, badRequest("query parameter %q: want one of %s", name, strings.Join(known, ", "))
		}
		if len(vals) > 1 && !slices.Contains(repeating, name) {
			return nil, badRequest("query parameter %q given %d times", name, len(vals))
		}
	}
	return v, nil
}

// pageOf reads ?limit= and ?after=.
func pageOf(v url.Values) (ops.Page, error) {
	p := ops.Page{Limit: DefaultLimit, After: v.Get("after")}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return p, badRequest("limit %q: want 1..%d", s, MaxLimit)
		}
		p.Limit = n
	}
	return p, nil
}

// boolParam reads a true/false parameter; absent is false.
func boolParam(v url.Values, name string) (bool, error) {
	s := v.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest("%s %q: want true or false", name, s)
	}
	return b, nil
}

// pageOut is what every listing answers (batches, jobs, access requests,
// holds, hosts): a page of its items, the cursor of the next page
// (?after=), null on the last (always, for a listing given whole), and the
// items that could not be read.
type pageOut[T any] struct {
	Items    []T      `json:"items"`
	Next     *string  `json:"next"`
	Problems []string `json:"problems"` // items that could not be read, left out
}

func newPage[T any](items []T, next string, problems []error) pageOut[T] {
	if items == nil {
		items = []T{} // an empty listing is [], never null
	}
	p := pageOut[T]{Items: items, Problems: []string{}}
	if next != "" {
		p.Next = &next
	}
	for _, e := range problems {
		p.Problems = append(p.Problems, e.Error())
	}
	return p
}
