package inventory

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// A restart of the server between two Records: the second succeeds (the
// pool replaces its broken connections), and nothing is lost or doubled.
func TestPostgresRestartBetweenRecords(t *testing.T) {
	s := pgtest.Start(t)
	p := openPostgres(t, s)
	one := record(arkA, 1, "one", "loc-1")
	one.Events = []Event{event(EventIngestion, 1)}
	mustRecord(t, p, one)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, p, record(arkA, 2, "two", "loc-1"))
	mustRecord(t, p, one) // again, after the restart: changes nothing

	d := mustObject(t, p, arkA)
	if len(d.Versions) != 2 || !reflect.DeepEqual(d.Versions[0], mustNormalize(t, one)) || d.Object.LatestVersion != 2 {
		t.Fatalf("after a restart: %+v; want v1 as recorded, then v2", d)
	}
}

// With the server stopped, every call fails soon with ErrUnavailable, which
// is not a refusal (the pipeline tries again); once it is back, Record
// works on the same Postgres.
func TestPostgresStoppedIsUnavailable(t *testing.T) {
	s := pgtest.Start(t)
	p := openPostgres(t, s)
	mustRecord(t, p, record(arkA, 1, "one", "loc-1"))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, lookupErr := p.LookupLocalID(ctx, profile, "loc-1")
	_, objectErr := p.Object(ctx, arkA)
	for _, err := range []error{p.Record(ctx, record(arkB, 1, "bee")), lookupErr, objectErr} {
		if !errors.Is(err, ErrUnavailable) || Refused(err) || errors.Is(err, ErrConflict) ||
			!strings.Contains(err.Error(), fmt.Sprintf("inventory database postgres://127.0.0.1:%d/t_", s.Port)) {
			t.Errorf("with the server stopped: %v; want ErrUnavailable naming the database", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the calls waited out their context instead of failing")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, p, record(arkB, 1, "bee"))
	if ark, ok, err := p.LookupLocalID(ctx, profile, "loc-1"); err != nil || !ok || ark != arkA {
		t.Fatalf("after the restart: lookup = %q, %v, %v", ark, ok, err)
	}
}

// The server restarts while a host records versions; each Record that
// fails is tried again, as the pipeline does, until it succeeds. Every
// version ends recorded once.
func TestPostgresRestartDuringRecording(t *testing.T) {
	s := pgtest.Start(t)
	p := openPostgres(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const before, after, most = 5, 5, 10_000
	started, restarted := make(chan struct{}), make(chan struct{})
	var failures []error
	recorded := 0
	var wg sync.WaitGroup
	wg.Go(func() {
		// Record until `after` records past the restart (or ctx ends).
		for left := after; left > 0 && recorded < most && ctx.Err() == nil; recorded++ {
			r := record(fmt.Sprintf("ark:/99999/fk4r%05d", recorded), 1, fmt.Sprint(recorded), fmt.Sprint("loc-", recorded))
			r.Events = []Event{event(EventIngestion, 1)}
			for err := p.Record(ctx, r); err != nil; err = p.Record(ctx, r) {
				failures = append(failures, err)
				if ctx.Err() != nil {
					return
				}
			}
			select {
			case <-restarted:
				left--
			default:
			}
			if recorded == before {
				close(started)
			}
		}
	})
	<-started
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	close(restarted)
	wg.Wait()
	t.Logf("%d versions recorded; %d Records failed and were tried again", recorded, len(failures))
	for _, err := range failures {
		if Refused(err) || errors.Is(err, ErrConflict) || ctx.Err() != nil {
			t.Errorf("a Record during the restart: %v; want only retryable errors", err)
		}
	}
	countRows(t, pgtestURL(t, p), map[string]int{"objects": recorded, "versions": recorded, "files": 2 * recorded,
		"local_ids": recorded, "events": recorded})
}

// countRows checks how many rows each table of the database at url holds,
// through a connection of its own (a pool's may have gone with a restart).
func countRows(t *testing.T, url string, want map[string]int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for table, n := range want {
		var got int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Errorf("%s holds %d rows, want %d", table, got, n)
		}
	}
}

// openHosts opens n inventories in the database at url, each with a pool
// of its own, as n hosts do.
func openHosts(t *testing.T, url string, n int) []*Postgres {
	t.Helper()
	invs := make([]*Postgres, n)
	for h := range invs {
		p, err := NewPostgres(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		invs[h] = p
	}
	return invs
}

// Hosts (pools of their own) record the same versions at once, while pairs
// of objects contest a local id: each id goes to one object, whose versions
// are recorded once; the other object is not recorded at all.
func TestPostgresHostsContend(t *testing.T) {
	url := pgtest.NewDatabase(t, nil)
	const hosts, objects, versions = 3, 8, 3
	invs := openHosts(t, url, hosts)
	ark := func(i int) string { return fmt.Sprintf("ark:/99999/fk4h%03d", i) }
	var wg sync.WaitGroup
	var mu sync.Mutex
	var unexpected []error
	for _, p := range invs {
		for i := range objects {
			for v := 1; v <= versions; v++ {
				wg.Go(func() {
					r := record(ark(i), v, fmt.Sprintf("%d-%d", i, v), fmt.Sprint("pair-", i/2), fmt.Sprint("own-", i))
					if err := p.Record(context.Background(), r); err != nil && !errors.Is(err, ErrConflict) {
						mu.Lock()
						unexpected = append(unexpected, err)
						mu.Unlock()
					}
				})
			}
		}
	}
	wg.Wait()
	for _, err := range unexpected {
		t.Errorf("a Record failed other than by a conflict (a deadlock?): %v", err)
	}
	for pair := range objects / 2 {
		winner, ok, err := invs[0].LookupLocalID(context.Background(), profile, fmt.Sprint("pair-", pair))
		if err != nil || !ok || (winner != ark(2*pair) && winner != ark(2*pair+1)) {
			t.Fatalf("pair-%d went to %q (%v, %v)", pair, winner, ok, err)
		}
	}
	countRows(t, url, map[string]int{"objects": objects / 2, "versions": objects / 2 * versions,
		"files": objects / 2 * versions * 2, "local_ids": objects})
}

// Hosts' audits record the events of many objects in one transaction
// each (RecordVersions), the objects in whatever order their audits ended:
// they lock the objects' rows in one order, so no two wait for each other
// (the database answered "deadlock detected" to one of two transactions
// that gave A, B and B, A).
func TestPostgresGroupRecordsDoNotDeadlock(t *testing.T) {
	hosts := openHosts(t, pgtest.NewDatabase(t, nil), 2)
	arks := []string{arkA, arkB}
	for _, ark := range arks {
		mustRecord(t, hosts[0], record(ark, 1, ark))
	}
	const rounds = 30
	errs := make(chan error, 2*rounds)
	var wg sync.WaitGroup
	for h, p := range hosts {
		wg.Go(func() {
			for range rounds {
				rs := []Record{record(arks[h], 1, arks[h]), record(arks[1-h], 1, arks[1-h])} // A, B on one host; B, A on the other
				for i := range rs {
					rs[i].Events = []Event{event(EventFixityCheck, 10)}
				}
				errs <- p.RecordVersions(context.Background(), rs)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a group of records failed: %v", err)
		}
	}
	for _, ark := range arks {
		if d := mustObject(t, hosts[0], ark); len(d.Versions[0].Events) != 2*rounds {
			t.Errorf("%s: %d events, want %d", ark, len(d.Versions[0].Events), 2*rounds)
		}
	}
}

// A server that hangs (SIGSTOP: its connections stay open, nothing
// answers) is out of reach within the URL's query_timeout, not tried
// again call after call: each call fails with ErrUnavailable saying so.
// Once the server runs again, the same Postgres records.
func TestPostgresFrozenIsUnavailable(t *testing.T) {
	s := pgtest.Start(t)
	const timeout = time.Second
	p, err := NewPostgres(t.Context(), pgtest.NewDatabase(t, s)+"&query_timeout="+timeout.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	mustRecord(t, p, record(arkA, 1, "one", "loc-1"))
	if err := s.Freeze(); err != nil { // the test's end stops it frozen or not
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	err = p.Record(ctx, record(arkB, 1, "bee"))
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no answer in 1s (query_timeout)") {
		t.Errorf("with the server frozen: %v; want ErrUnavailable, no answer in 1s", err)
	}
	t.Logf("found out in %v: %v", took, err)
	if took > 10*timeout { // not the minute of ctx: a loaded machine's slack aside
		t.Errorf("the frozen server was found out after %v; want about query_timeout (%v)", took, timeout)
	}
	if err := s.Thaw(); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, p, record(arkB, 1, "bee"))
}

func TestPostgresQueryTimeoutRefusals(t *testing.T) {
	for _, v := range []string{"soon", "0s", "-1s"} {
		_, err := NewPostgres(t.Context(), "postgres://h/db?query_timeout="+v)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `query_timeout="`+v+`"`) {
			t.Errorf("query_timeout=%s: %v; want ErrInvalid naming it", v, err)
		}
	}
}
