package reactor_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

func TestParseRoles(t *testing.T) {
	t.Parallel()
	got, err := reactor.ParseRoles([]string{" Reporting", "storing", "STORING", "intake"})
	if want := []reactor.Role{"storing", reactor.RoleIntake, reactor.RoleReporting}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseRoles: %v %v, want %v in pipeline order, each once", got, err, want)
	}
	for _, bad := range [][]string{{"storage"}, {"downloading", "completed"}, {}} {
		_, err := reactor.ParseRoles(bad)
		if err == nil || !strings.Contains(err.Error(), "pending, estimating, provisioning, downloading, processing, storing, recording, notify, intake, reporting") {
			t.Errorf("ParseRoles(%q): %v, want an error listing every known state", bad, err)
		} else if len(bad) > 0 && !strings.Contains(err.Error(), `"`+bad[len(bad)-1]+`"`) {
			t.Errorf("ParseRoles(%q): %v, want the bad name quoted", bad, err)
		}
	}
	if len(reactor.AllRoles()) != len(reactor.JobStates)+2 {
		t.Errorf("AllRoles %v: want every job state, intake and reporting", reactor.AllRoles())
	}
}

// A daemon needs handlers only for what it owns; an unknown role is a bad
// setting.
func TestRolesNeedOnlyTheirHandlers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.session()
	cfg := reactor.Config{Queue: e.queue(s), Session: s, Bus: e.bus, Roles: []reactor.Role{"notify"},
		Jobs: map[queue.State]reactor.JobHandler{queue.Notify: reactor.PassThrough{}.Handlers()[queue.Notify]}}
	if _, err := reactor.New(cfg); err != nil {
		t.Errorf("notify alone with its one handler: %v", err)
	}
	cfg.Roles = []reactor.Role{"notify", reactor.RoleReporting}
	if _, err := reactor.New(cfg); err == nil || !strings.Contains(err.Error(), "Reporter") {
		t.Errorf("reporting without a Reporter: %v, want an error", err)
	}
	cfg.Roles = []reactor.Role{"notify", "Storage"}
	if _, err := reactor.New(cfg); !errors.Is(err, reactor.ErrConfig) || !strings.Contains(err.Error(), `"Storage"`) {
		t.Errorf("an unknown role: %v, want ErrConfig naming it", err)
	}
}

// withoutRoles has a daemon own every role but these.
func withoutRoles(not ...reactor.Role) func(*reactor.Config) {
	return func(c *reactor.Config) {
		c.Roles = slices.DeleteFunc(reactor.AllRoles(), func(x reactor.Role) bool { return slices.Contains(not, x) })
	}
}

// consume works job state st as a program beside the daemon would, on its
// own session, with the queue API only: a child watch on the state's
// folder, then every job there acquired, changed by do and moved to the
// next state. stop ends it and says how many jobs it moved.
func consume(t *testing.T, e *env, st queue.State, do func(*queue.Job) queue.JobChange) (stop func() int) {
	s := e.session()
	q := e.queue(s)
	next, _ := queue.JobMachine.Success(st)
	ctx, cancel := context.WithCancel(context.Background())
	moved := make(chan int, 1)
	fail := func(format string, a ...any) {
		if ctx.Err() == nil {
			t.Errorf("consumer of %s: "+format, append([]any{st}, a...)...)
		}
	}
	go func() {
		n := 0
		defer func() { moved <- n }()
		for ctx.Err() == nil {
			// The watch first: a job added after it fires it, so none is missed.
			_, _, added, err := s.Conn.ChildrenW(q.Path("/jobs/states/" + st.Folder()))
			if err != nil {
				fail("watch: %v", err)
				return
			}
			for {
				j, err := q.AcquireJob(ctx, st)
				if err != nil || j == nil {
					break
				}
				c := do(j)
				c.Release = true
				if err := q.SetJobStatus(ctx, j, next, c); err != nil {
					fail("move %s on: %v", j.ID, err)
					return
				}
				n++
			}
			select {
			case <-added:
			case <-ctx.Done():
			}
		}
	}()
	stop = sync.OnceValue(func() int { cancel(); return <-moved })
	t.Cleanup(func() { stop() }) // before its session closes
	return stop
}

// A daemon that does not own Storing and Recording never acquires a job
// there; a program on the queue API works those two states, and each job it
// moves on wakes the daemon through its watch of the next state's folder
// (the rescan is an hour away): the whole batch completes.
func TestOtherConsumerOwnsStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	all := e.outside(events.SubjectAll)
	e.daemon("host-a", withoutRoles("storing", "recording"), func(c *reactor.Config) { c.Rescan = time.Hour })
	var mu sync.Mutex
	stored := map[string]bool{}
	storing := consume(t, e, queue.Storing, func(j *queue.Job) queue.JobChange {
		mu.Lock()
		defer mu.Unlock()
		stored[j.ID] = true
		return queue.JobChange{Inventory: &queue.StepManifest{ManifestURL: "http://consumer.example/" + j.ID, Mode: "add"}}
	})
	recording := consume(t, e, queue.Recording, func(j *queue.Job) queue.JobChange {
		if j.Inventory == nil || !strings.HasSuffix(j.Inventory.ManifestURL, "/"+j.ID) {
			t.Errorf("job %s reached Recording with inventory %+v, not the one Storing wrote", j.ID, j.Inventory)
		}
		return queue.JobChange{}
	})

	const n = 12
	b := e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:12"})
	var steps []events.Event
	for done := false; !done; {
		select {
		case ev := <-all:
			steps = append(steps, ev)
			done = ev.Kind == events.KindBatch && ev.BatchID == b.ID && ev.To == string(queue.Completed)
		case <-time.After(2 * time.Minute):
			t.Fatalf("batch %s did not complete (%d events seen)", b.ID, len(steps))
		}
	}
	if s, r := storing(), recording(); s != n || r != n {
		t.Errorf("the consumer moved %d jobs out of Storing and %d out of Recording, want %d each", s, r, n)
	}
	completed, recovered := 0, 0
	for _, ev := range steps {
		if ev.RecoveredBy != "" {
			// The consumer's move into Notify, published by the daemon
			// when it moved the job on (decision 131).
			if ev.To != string(queue.Notify) {
				t.Errorf("recovered event → %s of job %s; want only the consumer's moves into Notify", ev.To, ev.JobID)
			}
			recovered++
			continue
		}
		if ev.From == string(queue.Storing) || ev.From == string(queue.Recording) {
			t.Errorf("the daemon moved job %s %s → %s: it does not own %s", ev.JobID, ev.From, ev.To, ev.From)
		}
		if ev.Kind == events.KindJob && ev.To == string(queue.Completed) && stored[ev.JobID] {
			completed++
		}
	}
	if completed != n || recovered != n {
		t.Errorf("%d jobs the consumer stored completed, %d of its moves into Notify were published for it; want %d each", completed, recovered, n)
	}
	e.clean()
}

// withBus gives a daemon a bus of its own on the test's NATS, stamping its
// events with its host name.
func withBus(e *env, host string) func(*reactor.Config) {
	bus, err := events.Open(context.Background(), events.Config{URL: e.bus.ClientURL(), Host: host, Logger: e.log})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = bus.Close() })
	return func(c *reactor.Config) { c.Bus = bus }
}

// Batch intake and reporting are roles of their own: a daemon that owns
// neither never takes a pending batch nor reports one, though it runs every
// job; the one that owns intake makes every batch's jobs and the one that
// owns reporting reports every batch, though neither ran a job's last step.
func TestIntakeAndReportingOwned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	all := e.outside(events.SubjectAll)
	e.daemon("jobs", withBus(e, "jobs"), withoutRoles(reactor.RoleIntake, reactor.RoleReporting))
	e.daemon("intake", withBus(e, "intake"), func(c *reactor.Config) { c.Roles = []reactor.Role{reactor.RoleIntake} })
	e.daemon("reporter", withBus(e, "reporter"), func(c *reactor.Config) { c.Roles = []reactor.Role{reactor.RoleReporting} })

	bids := map[string]bool{}
	for range 4 {
		bids[e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:5"}).ID] = true
	}
	bids[e.submit(map[string]any{"profile_name": "demo", "payload_url": "passthrough:bad"}).ID] = true // no jobs: reports Failed at once
	done := map[string]bool{}
	var seen []events.Event
	for len(done) < len(bids) {
		select {
		case ev := <-all:
			seen = append(seen, ev)
			if ev.Kind == events.KindBatch && (ev.To == string(queue.Completed) || ev.To == string(queue.Failed)) {
				done[ev.BatchID] = true
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%d of %d batches reported", len(done), len(bids))
		}
	}
	byHost := map[string]map[string]int{} // host → "batch Processing", "job Estimating"… → events
	for _, ev := range seen {
		if !bids[ev.BatchID] {
			continue
		}
		if byHost[ev.Host] == nil {
			byHost[ev.Host] = map[string]int{}
		}
		byHost[ev.Host][string(ev.Kind)+" "+ev.To]++
	}
	want := map[string]map[string]int{
		"intake":   {"batch Processing": 5},
		"reporter": {"batch Reporting": 5, "batch Completed": 4, "batch Failed": 1},
		"jobs":     {"job Estimating": 20, "job Provisioning": 20, "job Downloading": 20, "job Processing": 20, "job Storing": 20, "job Recording": 20, "job Notify": 20, "job Completed": 20},
	}
	for host, w := range want {
		if !maps.Equal(byHost[host], w) {
			t.Errorf("%s's events %v, want %v", host, byHost[host], w)
		}
	}
	if len(byHost) != len(want) {
		t.Errorf("events from hosts %v, want only %v", byHost, want)
	}
	e.clean()
}
