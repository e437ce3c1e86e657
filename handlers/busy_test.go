package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/storagetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// busyService is a storage or inventory service, or a depositor's server
// (busyPayload), whose first requests (left) are answered status, with a
// Retry-After when retryAfter gives one, before it serves; it notes when
// each request came and, for a busy answer, the moment its Retry-After
// asked for.
type busyService struct {
	next       http.Handler
	status     int
	retryAfter func(now time.Time) (header string, asked time.Time)
	left       atomic.Int32
	mu         sync.Mutex
	served     []servedAt
}

// newBusyService is a busyService answering its first left requests
// status, with retryAfter's Retry-After (nil: none); its next is set by
// the caller.
func newBusyService(status int, retryAfter func(time.Time) (string, time.Time), left int32) *busyService {
	svc := &busyService{status: status, retryAfter: retryAfter}
	svc.left.Store(left)
	return svc
}

// busyOneSecond is a server answering its first left requests 503 with a
// Retry-After of 1 s.
func busyOneSecond(left int32) *busyService {
	return newBusyService(http.StatusServiceUnavailable, retryAfterSeconds(1), left)
}

// retryAfterSeconds is a Retry-After of n seconds, and the moment it asks
// for.
func retryAfterSeconds(n int) func(now time.Time) (string, time.Time) {
	return func(now time.Time) (string, time.Time) {
		return strconv.Itoa(n), now.Add(time.Duration(n) * time.Second)
	}
}

// retryAfterDate is a Retry-After of an HTTP date d from now, and the
// moment it asks for.
func retryAfterDate(d time.Duration) func(now time.Time) (string, time.Time) {
	return func(now time.Time) (string, time.Time) {
		at := now.Add(d).Truncate(time.Second) // an HTTP date holds whole seconds
		return at.UTC().Format(http.TimeFormat), at
	}
}

type servedAt struct {
	at, asked time.Time // asked: zero when served, or busy without a Retry-After
	busy      bool
}

func (b *busyService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if b.left.Add(-1) < 0 {
		b.note(servedAt{at: now})
		b.next.ServeHTTP(w, r)
		return
	}
	s := servedAt{at: now, busy: true}
	if b.retryAfter != nil {
		var header string
		header, s.asked = b.retryAfter(now)
		w.Header().Set("Retry-After", header)
	}
	b.note(s)
	http.Error(w, "busy: answered by the test", b.status)
}

func (b *busyService) note(s servedAt) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.served = append(b.served, s)
}

// checkWaitedAsFor checks that every request after a busy answer came no
// sooner than its Retry-After asked, and that all busy answers were given.
func (b *busyService) checkWaitedAsFor(t *testing.T, busy int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	given := 0
	for i, s := range b.served {
		if !s.busy {
			continue
		}
		given++
		if i+1 == len(b.served) {
			t.Fatalf("no request after busy answer %d of %d", given, busy)
		}
		if next := b.served[i+1].at; next.Before(s.asked) {
			t.Errorf("request %d came %v after busy answer %d, sooner than its Retry-After asked (%v)",
				i+2, next.Sub(s.at).Round(time.Millisecond), given, s.asked.Sub(s.at).Round(time.Millisecond))
		}
	}
	if given != busy {
		t.Errorf("%d busy answers given, want %d", given, busy)
	}
}

// busyAnswers counts the busy answers svc gave.
func (b *busyService) busyAnswers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.served {
		if s.busy {
			n++
		}
	}
	return n
}

// toldBackEnds is backEnds, keeping the changes of the back ends out it is
// told, in order ("WHAT out", "WHAT back").
type toldBackEnds struct {
	backEnds
	mu   *sync.Mutex
	told *[]string
}

func (o toldBackEnds) BackEnd(what string, out bool) {
	o.backEnds.BackEnd(what, out)
	o.mu.Lock()
	defer o.mu.Unlock()
	*o.told = append(*o.told, what+map[bool]string{true: " out", false: " back"}[out])
}

func (o toldBackEnds) changes() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), *o.told...)
}

// A storage or inventory service answering 503 or 429 (busy, whatever the
// request) for a while, with a Retry-After in seconds or as a date, is a
// back end out: the job waits for it, its attempts unspent,
// ingestq_backend_out 1 then 0, each try no sooner than the Retry-After
// asked; then it completes. A 500 is the step's: it spends an attempt, and
// the back end is not counted out. Before, a 503 or 429 from a service
// spent the job's attempts as a 500 does (decision 929(a)), and the fetch
// client's jitter took a Retry-After of 2 s down to 1–2 s.
func TestServiceBusyWaitsForIt(t *testing.T) {
	t.Parallel()
	seconds, date := retryAfterSeconds(2), retryAfterDate(3*time.Second)
	for _, c := range []struct {
		name       string
		inventory  bool // the profile's inventory answers, not its storage
		status     int
		retryAfter func(time.Time) (string, time.Time)
		out        bool // counted out, waited for; else the step's, an attempt spent
	}{
		{name: "storage 503 Retry-After seconds", status: http.StatusServiceUnavailable, retryAfter: seconds, out: true},
		{name: "inventory 429 Retry-After date", inventory: true, status: http.StatusTooManyRequests, retryAfter: date, out: true},
		{name: "storage 429", status: http.StatusTooManyRequests, out: true},
		{name: "inventory 500", inventory: true, status: http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			svc := newBusyService(c.status, c.retryAfter, 2) // a while: two busy answers
			prof := profile.Default()
			var what string
			if c.inventory {
				inv, err := inventory.OpenLocal(t.TempDir() + "/inv.db")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = inv.Close() })
				svc.next = inventory.NewServer(inv, nil)
				srv := httptest.NewServer(svc)
				t.Cleanup(srv.Close)
				prof.Inventory, what = srv.URL, "the inventory of profile "+prof.Name
			} else {
				prof.Storage = storagetest.Start(t, func(h http.Handler) http.Handler { svc.next = h; return svc }).URL
				what = "storage target " + prof.Storage
			}
			obs := toldBackEnds{watchBackEnds(t), &sync.Mutex{}, &[]string{}}
			r := newRig(t, prof, withAttempts(2, 10*time.Millisecond),
				func(_ *handlers.Config, rc *reactor.Config) { rc.Observer = obs })
			b := r.submitObject("/obj.checkm", object{"a.txt": []byte("alpha\n")})
			if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
				t.Fatalf("batch %s (%s), want Completed once the service answers", b.State(), b.Status.Message)
			}
			svc.checkWaitedAsFor(t, 2)
			spent, told := obs.spent.Load(), obs.changes()
			if c.out {
				if spent != 0 || len(told) != 2 || told[0] != what+" out" || told[1] != what+" back" {
					t.Errorf("%d attempts spent, back ends told %q; want none spent, and %q out then back", spent, told, what)
				}
			} else if spent != 1 || len(told) != 0 {
				t.Errorf("%d attempts spent, back ends told %q; want 1 spent, no back end out", spent, told)
			}
			if got := obs.out(t); got["backend="+what] != 0 {
				t.Errorf("once the service answers, ingestq_backend_out is %v; want 0 for %q", got, what)
			}
		})
	}
}
