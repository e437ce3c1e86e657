package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func query(t *testing.T, url string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n)
	return n, err
}

func TestDatabasesAreSeparate(t *testing.T) {
	a, b := NewDatabase(t, nil), NewDatabase(t, nil)
	if a == b {
		t.Fatalf("two databases share the URL %s", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if n, err := query(t, a); err != nil || n != 1 {
		t.Fatalf("count in %s = %d, %v; want 1", a, n, err)
	}
	if _, err := query(t, b); err == nil {
		t.Fatalf("the table made in %s is in %s too", a, b)
	}
}

// Data written before a Stop is there after Restart, on the same port;
// while stopped, connections are refused.
func TestStopAndRestartKeepData(t *testing.T) {
	s := Start(t)
	url := NewDatabase(t, s)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := query(t, url); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := query(t, url); err != nil || n != 2 {
		t.Fatalf("after restart: count = %d, %v; want 2", n, err)
	}
}

func TestInstalledFindsTheBinaries(t *testing.T) {
	bin, err := Installed()
	if err != nil {
		t.Fatal(err)
	}
	if majorVersion(bin) < 10 {
		t.Fatalf("Installed = %s: no PostgreSQL major version in the path", bin)
	}
}
