package reactor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// assembler is an AccessHandler that tells each call as it starts, holds
// it until proceed is closed (nil: at once), and tells a call made for a
// request while another call for it runs.
type assembler struct {
	started chan string // each call's request, as it starts
	proceed chan struct{}
	twice   chan string

	mu      sync.Mutex
	running map[string]bool
}

func newAssembler(proceed chan struct{}) *assembler {
	return &assembler{started: make(chan string, 8), proceed: proceed, twice: make(chan string, 8), running: map[string]bool{}}
}

func (h *assembler) Assemble(ctx context.Context, a *queue.Access) (map[string]any, error) {
	ref := a.Ref()
	h.mu.Lock()
	if h.running[ref] {
		h.twice <- ref
	}
	h.running[ref] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.running, ref)
		h.mu.Unlock()
	}()
	h.started <- ref
	if h.proceed != nil {
		select {
		case <-h.proceed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return readyToken(a)
}

// readyToken is a's token as an assembler returns it: ready, with a URL.
func readyToken(a *queue.Access) (map[string]any, error) {
	t, err := a.AccessToken()
	if err != nil {
		return nil, err
	}
	t.TokenStatus, t.URL = queue.TokenReady, "http://example.org/"+t.Token+".zip"
	return t.Map(a.Token), nil
}

func (*assembler) Sweep(context.Context) ([]*queue.Access, error) { return nil, nil }

func (e *env) accessRequest(ark string) *queue.Access {
	e.t.Helper()
	tok := queue.AccessToken{Token: "t-" + ark, ARK: ark, Format: queue.FormatZip, TokenStatus: queue.TokenNotReady}
	a, err := e.q.CreateAccess(e.t.Context(), queue.AccessSmall, tok.Map(nil))
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// waitAccess waits for the events of requests refs into state to.
func (e *env) waitAccess(ch chan events.Event, to queue.State, refs ...string) {
	e.t.Helper()
	left := map[string]bool{}
	for _, ref := range refs {
		left[ref] = true
	}
	deadline := time.After(time.Minute)
	for len(left) > 0 {
		select {
		case ev := <-ch:
			if ev.To == string(to) {
				delete(left, ev.AccessID)
			}
		case <-deadline:
			e.t.Fatalf("requests %v did not reach %s", left, to)
		}
	}
}

// A request whose lock goes while its worker assembles it (its session
// expired under the step; here removed by hand) is not taken by a second
// worker of the same daemon, which would write the same package file: the
// second worker takes the next request, and the first completes its own.
func TestAccessRequestNotTakenTwiceByOneDaemon(t *testing.T) {
	e := newEnv(t)
	ends := e.outside("ingestq.access.>")
	proceed := make(chan struct{})
	h := newAssembler(proceed)
	e.daemon("host-a", func(c *reactor.Config) {
		c.Access, c.AccessWorkers = h, map[string]int{queue.AccessSmall: 2, queue.AccessLarge: 0}
	})
	first := e.accessRequest("ark:/1/first")
	if got := await(t, h.started, "the first request's assembly"); got != first.Ref() {
		t.Fatalf("first call for %s, want %s", got, first.Ref())
	}
	s := e.session()
	if err := s.Conn.Delete(e.q.Path("/access/small/"+first.ID+"/lock"), -1); err != nil {
		close(proceed)
		t.Fatal(err)
	}
	second := e.accessRequest("ark:/1/second") // wakes the idle worker
	select {
	case got := <-h.started:
		if got != second.Ref() {
			close(proceed)
			t.Fatalf("the idle worker took %s, want %s", got, second.Ref())
		}
	case ref := <-h.twice:
		close(proceed)
		t.Fatalf("request %s assembled by two workers at once", ref)
	case <-time.After(time.Minute):
		close(proceed)
		t.Fatal("the idle worker took nothing within a minute")
	}
	close(proceed)
	e.waitAccess(ends, queue.Completed, first.Ref(), second.Ref())
}

// A lock of the daemon's own session on a request no worker of it holds
// (an acquisition whose reply was lost, and whose landing could not be
// confirmed before the write gave up) is let go and the request taken:
// every daemon had passed it over as locked for as long as the session
// lived.
func TestAccessOrphanedLockOfTheSessionIsReleased(t *testing.T) {
	e := newEnv(t)
	ends := e.outside("ingestq.access.>")
	a := e.accessRequest("ark:/1/orphan")
	e.daemon("host-a", func(c *reactor.Config) {
		c.Access, c.AccessWorkers = newAssembler(nil), map[string]int{queue.AccessSmall: 1, queue.AccessLarge: 0}
		// The daemon's session takes the request before it runs; the
		// reply is dropped, as if lost.
		if got, _, err := c.Queue.AcquireAccessWork(t.Context(), queue.AccessSmall, nil); err != nil || got == nil {
			t.Fatalf("acquire on the daemon's session: %v, %v", got, err)
		}
	})
	e.waitAccess(ends, queue.Completed, a.Ref())
}
