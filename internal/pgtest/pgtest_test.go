package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(WithShared(m)) }

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
// while stopped, connections are refused. Stop is PostgreSQL's fast
// shutdown, which cuts a client still connected rather than waiting for it.
func TestStopAndRestartKeepData(t *testing.T) {
	s := Start(t)
	url := NewDatabase(t, s)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if log, err := os.ReadFile(s.LogPath()); err != nil || !strings.Contains(string(log), "received fast shutdown request") {
		t.Fatalf("the server's log has no fast shutdown (%v):\n%s", err, log)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a client connected before Stop still has a server")
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

// Installed picks the newest version with both binaries, and names the
// install command when there is none.
func TestInstalledPicksTheNewestVersion(t *testing.T) {
	defer func(root string) { installRoot = root }(installRoot)
	installRoot = t.TempDir()
	if _, err := Installed(); err == nil || !strings.Contains(err.Error(), "./scripts/install-postgres.sh") ||
		!strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Fatalf("Installed with nothing installed: %v; want the install command", err)
	}
	for _, v := range []string{"9", "15", "16"} {
		bin := filepath.Join(installRoot, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if v == "16" && name == "postgres" {
				continue // a version without its server is not usable
			}
			if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if bin, err := Installed(); err != nil || bin != filepath.Join(installRoot, "15", "bin") {
		t.Fatalf("Installed = %s, %v; want version 15's (9 is older, 16 lacks postgres)", bin, err)
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
