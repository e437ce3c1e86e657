package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// gated is an OCFL root whose survey of one ARK waits for open.
type gated struct {
	*ocfl.Store
	ark  string
	open <-chan struct{}
}

func (g gated) Survey(ctx context.Context, ark string) (storage.Stored, error) {
	if ark == g.ark {
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.Survey(ctx, ark)
}

// auditLine is any line of the audit's stream.
type auditLine struct {
	Type     string  `json:"type"`
	Kind     string  `json:"kind"`
	ARK      string  `json:"ark"`
	Target   string  `json:"target"`
	Version  int     `json:"version"`
	File     string  `json:"file"`
	Objects  int     `json:"objects"`
	Findings int     `json:"findings"`
	Last     string  `json:"last"`
	Error    *string `json:"error"`
}

// auditedStore is an OCFL root in a folder of t's, and an inventory that
// records what the test stores there.
func auditedStore(t *testing.T) (*ocfl.Store, place.Place, *inventory.Local) {
	t.Helper()
	inv, err := inventory.OpenLocal(filepath.Join(t.TempDir(), "inventory.db"))
	must(t, err)
	t.Cleanup(func() { _ = inv.Close() })
	pl, err := place.Open(t.Context(), t.TempDir())
	must(t, err)
	st, err := ocfl.New(t.Context(), pl)
	must(t, err)
	return st, pl, inv
}

// storeRecorded stores version 1 of ark, one file a.txt, and records it.
func storeRecorded(t *testing.T, st *ocfl.Store, inv inventory.Inventory, ark string) {
	t.Helper()
	file, data := filepath.Join(t.TempDir(), "a.txt"), []byte("alpha")
	must(t, os.WriteFile(file, data, 0o600))
	d := sha256.Sum256(data)
	sum := hex.EncodeToString(d[:])
	_, err := st.Put(t.Context(), storage.Object{ARK: ark, Files: []storage.File{{Name: "a.txt", Path: file, Size: 5, SHA256: sum}}})
	must(t, err)
	must(t, inv.Record(t.Context(), inventory.Record{ARK: ark, Profile: "demo", Version: 1, Created: time.Now(),
		Files: []inventory.FileRow{{Name: "a.txt", Size: 5, SHA256: sum}}}))
}

// The answer's status and headers go out at once: the client has its 200
// while the only object's audit still waits, not with the first line.
func TestAuditAnswersAtOnce(t *testing.T) {
	t.Parallel()
	st, _, inv := auditedStore(t)
	ark := "ark:/99999/fk4a"
	storeRecorded(t, st, inv, ark)
	open := make(chan struct{})
	defer close(open)
	target := audit.Target{Name: "the-root", URL: "the-root", Store: gated{Store: st, ark: ark, open: open}}
	b := setup(t, func(o *options) {
		o.audit = &audit.Auditor{Inventory: inv, Targets: func(context.Context, string) ([]audit.Target, error) {
			return []audit.Target{target}, nil
		}}
	})
	// Without the headers sent at once they come with the first line: the
	// progress line, after audit.Defaults.Every (10 s). Half of that bounds
	// the wait for a failure; the answer comes in milliseconds.
	ctx, cancel := context.WithTimeout(t.Context(), audit.Defaults.Every/2)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", b.base+"audit?ark="+ark, nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer while the object's audit waits: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
}

// GET /audit streams NDJSON: the damaged object's finding comes (flushed)
// while the next object's audit still waits, and a summary line ends it.
// A bad query is a 400 naming the parameter; a read token is refused; a
// daemon without storage answers 501.
func TestAuditStreamsFindings(t *testing.T) {
	t.Parallel()
	st, pl, inv := auditedStore(t)
	damaged, next := "ark:/99999/fk4a", "ark:/99999/fk4b"
	for _, ark := range []string{damaged, next} {
		storeRecorded(t, st, inv, ark)
	}
	must(t, pl.Delete(t.Context(), ocfltest.ObjectRoot(damaged)+"/v1/content/a.txt"))
	open := make(chan struct{})
	target := audit.Target{Name: "the-root", URL: "the-root", Store: gated{Store: st, ark: next, open: open}}
	b := setup(t, func(o *options) {
		o.audit = &audit.Auditor{Inventory: inv, Targets: func(context.Context, string) ([]audit.Target, error) {
			return []audit.Target{target}, nil
		}}
	})

	req, err := http.NewRequestWithContext(t.Context(), "GET", b.base+"audit?fixity=true", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/x-ndjson" {
		t.Fatalf("status %d, Content-Type %q; want 200 application/x-ndjson", resp.StatusCode, ct)
	}
	lines := bufio.NewScanner(resp.Body)
	read := func() auditLine {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the stream ended: %v", lines.Err())
		}
		var l auditLine
		must(t, json.Unmarshal(lines.Bytes(), &l))
		return l
	}
	// The next object waits: this line was flushed before the audit ended.
	if l := read(); l.Type != "finding" || l.Kind != string(audit.FileMissing) || l.ARK != damaged || l.Target != "the-root" ||
		l.Version != 1 || l.File != "a.txt" {
		t.Errorf("first line %+v, want the finding of %s's a.txt missing", l, damaged)
	}
	close(open)
	l := read()
	for l.Type == "progress" {
		l = read()
	}
	if l.Type != "summary" || l.Objects != 2 || l.Findings != 1 || l.Last != next || l.Error != nil {
		t.Errorf("last line %+v, want the summary: 2 objects, 1 finding, last %s, no error", l, next)
	}
	if lines.Scan() {
		t.Errorf("a line after the summary: %s", lines.Text())
	}

	// ark is repeatable.
	a := b.do("GET", "audit?ark="+next+"&ark="+damaged, adminToken, nil)
	var last auditLine
	for _, line := range bytes.Split(bytes.TrimSpace(a.body), []byte("\n")) {
		must(t, json.Unmarshal(line, &last))
	}
	if a.status != http.StatusOK || last.Type != "summary" || last.Objects != 2 || last.Findings != 1 {
		t.Errorf("two ARKs: %d, last line %+v; want 200, a summary of 2 objects and 1 finding", a.status, last)
	}

	b.do("GET", "audit?limit=0", adminToken, nil).problem(t, http.StatusBadRequest, "invalid", `limit "0"`)
	b.do("GET", "audit?ark=fk4a", adminToken, nil).problem(t, http.StatusBadRequest, "invalid", `ark "fk4a"`)
	b.do("GET", "audit?ark="+damaged+"&after="+damaged, adminToken, nil).problem(t, http.StatusBadRequest, "invalid", "ark with after")
	b.do("GET", "audit?after=ark:%FF", adminToken, nil).problem(t, http.StatusBadRequest, "invalid", `after "ark:\xff"`)
	b.do("GET", "audit?fixity=yes", adminToken, nil).problem(t, http.StatusBadRequest, "invalid", `fixity "yes"`)
	b.do("GET", "audit", readToken, nil).problem(t, http.StatusForbidden, "forbidden", "admin")
	setup(t).do("GET", "audit", adminToken, nil).problem(t, http.StatusNotImplemented, "not-implemented", "passthrough")
}

// GET /audit?fixity=true&record=true leaves a fixity check event of each
// version in the inventory and counts it in the summary; record alone is
// a 400 naming it.
func TestAuditRecordsFixityChecks(t *testing.T) {
	t.Parallel()
	st, _, inv := auditedStore(t)
	ark := "ark:/99999/fk4a"
	storeRecorded(t, st, inv, ark)
	b := setup(t, func(o *options) {
		o.audit = &audit.Auditor{Inventory: inv, Agent: "ingestq test on host1", Targets: func(context.Context, string) ([]audit.Target, error) {
			return []audit.Target{{Name: "the-root", URL: "the-root", Store: st}}, nil
		}}
	})
	b.do("GET", "audit?record=true", adminToken, nil).problem(t, http.StatusBadRequest, "invalid", "record without fixity")
	b.do("GET", "audit?fixity=true&record=maybe", adminToken, nil).problem(t, http.StatusBadRequest, "invalid", `record "maybe"`)

	a := b.do("GET", "audit?fixity=true&record=true", adminToken, nil)
	lines := bytes.Split(bytes.TrimSpace(a.body), []byte("\n"))
	var sum struct {
		Type           string `json:"type"`
		EventsRecorded int    `json:"events_recorded"`
	}
	must(t, json.Unmarshal(lines[len(lines)-1], &sum))
	if a.status != http.StatusOK || sum.Type != "summary" || sum.EventsRecorded != 1 {
		t.Errorf("fixity and record: %d, summary %+v; want 200 and 1 event recorded", a.status, sum)
	}
	d, err := inv.Object(t.Context(), ark)
	must(t, err)
	if evs := d.Versions[0].Events; len(evs) != 1 || evs[0].Type != inventory.EventFixityCheck || evs[0].Outcome != inventory.OutcomeSuccess ||
		!strings.HasPrefix(evs[0].Detail, "audit with fixity at storage target the-root: 1 of 1 recorded files") {
		t.Errorf("events %+v, want the audit's fixity check, a success at the-root", evs)
	}
}
