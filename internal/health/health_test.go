package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/internal/health"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// /readyz names every check; one failing makes it 503 with that check's
// error, and each check runs under a deadline. /healthz answers regardless.
func TestReady(t *testing.T) {
	var down error
	checks := []health.Check{
		{Name: "zookeeper", Run: func(context.Context) error { return down }},
		{Name: "storage", Run: func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			return nil
		}},
	}
	mux := http.NewServeMux()
	mux.Handle("GET /readyz", health.Ready(checks))
	mux.Handle("GET /healthz", health.Alive())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func(path string) (int, health.Report) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep health.Report
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", path, ct)
		}
		return resp.StatusCode, rep
	}
	code, rep := get("/readyz")
	want := health.Report{Ready: true, Checks: []health.Result{{Name: "zookeeper", OK: true}, {Name: "storage", OK: true}}}
	if code != http.StatusOK || !equal(rep, want) {
		t.Errorf("all up: %d %+v", code, rep)
	}
	down = errors.New("session state StateDisconnected")
	code, rep = get("/readyz")
	want = health.Report{Checks: []health.Result{{Name: "zookeeper", Error: "session state StateDisconnected"}, {Name: "storage", OK: true}}}
	if code != http.StatusServiceUnavailable || !equal(rep, want) {
		t.Errorf("zookeeper down: %d %+v", code, rep)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with zookeeper down: %d, want 200", code)
	}
}

func equal(a, b health.Report) bool {
	if a.Ready != b.Ready || len(a.Checks) != len(b.Checks) {
		return false
	}
	for i := range a.Checks {
		if a.Checks[i] != b.Checks[i] {
			return false
		}
	}
	return true
}
