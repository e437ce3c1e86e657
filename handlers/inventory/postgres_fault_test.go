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
	const n = 30
	halfway := make(chan struct{})
	failures := make(chan error, n*100)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			r := record(fmt.Sprintf("ark:/99999/fk4r%03d", i), 1, fmt.Sprint(i), fmt.Sprint("loc-", i))
			r.Events = []Event{event(EventIngestion, i)}
			for err := p.Record(ctx, r); err != nil; err = p.Record(ctx, r) {
				if ctx.Err() != nil {
					failures <- err
					return
				}
				failures <- err
			}
			if i == n/3 {
				close(halfway)
			}
		}
	})
	<-halfway
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(failures)
	t.Logf("%d Records failed and were tried again", len(failures))
	for err := range failures {
		if Refused(err) || errors.Is(err, ErrConflict) || ctx.Err() != nil {
			t.Errorf("a Record during the restart: %v; want only retryable errors", err)
		}
	}
	countRows(t, p, map[string]int{"objects": n, "versions": n, "files": 2 * n, "local_ids": n, "events": n})
}

// countRows checks how many rows each table holds.
func countRows(t *testing.T, p *Postgres, want map[string]int) {
	t.Helper()
	for table, n := range want {
		var got int
		if err := p.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Errorf("%s holds %d rows, want %d", table, got, n)
		}
	}
}

// Hosts (pools of their own) record the same versions at once, while pairs
// of objects contest a local id: each id goes to one object, whose versions
// are recorded once; the other object is not recorded at all.
func TestPostgresHostsContend(t *testing.T) {
	url := pgtest.NewDatabase(t, nil)
	const hosts, objects, versions = 3, 8, 3
	invs := make([]*Postgres, hosts)
	for h := range invs {
		p, err := NewPostgres(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		invs[h] = p
	}
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
	countRows(t, invs[0], map[string]int{"objects": objects / 2, "versions": objects / 2 * versions,
		"files": objects / 2 * versions * 2, "local_ids": objects})
}
