package cli_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The audit's progress line is checked on a pseudo-terminal (terminal_test.go).
func init() { auditTerminal = openTerminal }

// On a terminal of 40 columns the progress line, longer, is cut to 39:
// drawn whole it would wrap, and each redraw would leave a row behind.
func TestAuditProgressLineFitsTheTerminal(t *testing.T) {
	t.Parallel()
	tty, screen := openTerminal(t)
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 40}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"type":"progress","objects":1234,"versions":1300,"files":56789,"findings":0,"last":"ark:/99999/fk40000017"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var errb logtest.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, []string{"--zk", zktest.Shared(t).Addr, "--zk-root", "/ingestq-test-none", "audit", "--api", srv.URL + "/api/v1"},
			tty, &errb, func(string) string { return "" })
	}()
	// The screen is read again until the daemon's counts show (a terminal
	// tells no event).
	var shown string
	for deadline := time.Now().Add(time.Minute); shown == ""; time.Sleep(10 * time.Millisecond) {
		for _, l := range screen() {
			if strings.HasPrefix(l, "auditing: 1234 objects") {
				shown = l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed the counts:\n%s", strings.Join(screen(), "\n"))
		}
	}
	stop()
	wantCode(t, <-exited, 130)
	if utf8.RuneCountInString(shown) != 39 || !strings.HasSuffix(shown, "…") {
		t.Errorf("progress line %q (%d characters): want it cut to 39, ending in …", shown, utf8.RuneCountInString(shown))
	}
}
