package dashboard_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ingestq/ingestq/handlers"
)

// A depositor's file that the daemon's server gives out as octet-stream
// (the hand-off route's files, on the dashboard's origin, no token) does
// not run as a script of a dashboard page, though the page's CSP takes
// scripts from 'self': an HTML injection, were there one, could not use
// a deposit to run its code. Before the server's nosniff, Chromium ran it.
func TestADepositedFileDoesNotRunAsTheDashboardsScript(t *testing.T) {
	b := setup(t)
	// As handlers' hand-off route serves a job's file; what answers it is
	// the server's concern, not the handler's.
	b.web.Handle("GET "+handlers.HandoffPrefix, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, `window.__pwned = "by a deposited file";`)
	}))

	p := newTab(t)
	p.signIn(b.base, readToken)
	p.noConsoleErrors("sign in")
	// What an injected <script src> would do, from inside the page.
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`new Promise(resolve => {
	  const s = document.createElement("script");
	  s.src = "`+handlers.HandoffPrefix+`jid0000000001/files/producer/notes.txt";
	  s.onload = () => resolve("ran: " + window.__pwned);
	  s.onerror = () => resolve("refused: " + String(window.__pwned));
	  document.head.appendChild(s);
	})`, chromedp.EvalAwaitPromise))
	must(t, err)
	if got != "refused: undefined" {
		t.Errorf("a deposited file as the page's script: %s; want it refused", got)
	}
	p.mu.Lock()
	said := strings.Join(p.errors, "\n")
	p.errors = nil
	p.mu.Unlock()
	if !strings.Contains(said, "strict MIME type checking") {
		t.Errorf("the console says %q; want the refusal for its MIME type", said)
	}
}
