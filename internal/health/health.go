// Package health answers the daemon's health probes: /healthz (the process
// serves) and /readyz (what it needs answers: ZooKeeper, NATS, and for the
// steps it works the working storage's room, storage and the inventory),
// each check named with its error, as JSON.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Check is one thing the daemon needs in order to work.
type Check struct {
	Name string
	Run  func(ctx context.Context) error // nil when it answers
}

// Timeout bounds each check: one that takes longer fails.
const Timeout = 3 * time.Second

// Result is one check's outcome, as /readyz reports it.
type Result struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Report is /readyz's body.
type Report struct {
	Ready  bool     `json:"ready"`
	Checks []Result `json:"checks"`
}

// Alive answers /healthz: 200 while the process serves HTTP, whatever its
// back ends do (a restart would not bring them back).
func Alive() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
	})
}

// Ready answers /readyz: every check at once, each under Timeout; 200 when
// all pass, 503 when one fails.
func Ready(checks []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := Run(r.Context(), checks)
		code := http.StatusOK
		if !rep.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, rep)
	})
}

// Run runs the checks at once and reports each, in their order.
func Run(ctx context.Context, checks []Check) Report {
	rep := Report{Ready: true, Checks: make([]Result, len(checks))}
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, Timeout)
			defer cancel()
			rep.Checks[i] = Result{Name: c.Name, OK: true}
			if err := c.Run(ctx); err != nil {
				rep.Checks[i] = Result{Name: c.Name, Error: err.Error()}
			}
		})
	}
	wg.Wait()
	for _, c := range rep.Checks {
		rep.Ready = rep.Ready && c.OK
	}
	return rep
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
