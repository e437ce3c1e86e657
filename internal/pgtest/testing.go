package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// shared is the test binary's server, set by Main.
var shared *Server

// Main is for TestMain: it starts one Server, runs the tests, then stops
// the server and removes its folder. If PostgreSQL is not installed it
// prints the install command and exits 1: it never skips.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

// WithShared is Main for goleak.VerifyTestMain: its Run starts the shared
// server, runs the tests and stops the server before the leak check.
func WithShared(m *testing.M) interface{ Run() int } { return withShared{m} }

type withShared struct{ m *testing.M }

func (w withShared) Run() int { return runMain(w.m) }

func runMain(m *testing.M) int {
	s, err := StartServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close() // deferred so a panicking test still stops the server
	shared = s
	return m.Run()
}

// Shared returns the test binary's server started by Main.
func Shared(t testing.TB) *Server {
	t.Helper()
	if shared == nil {
		t.Fatal("pgtest: no shared PostgreSQL server; add to the package's tests:\n" +
			"\tfunc TestMain(m *testing.M) { pgtest.Main(m) }")
	}
	return shared
}

// Start starts a server of t's own (for tests that stop or restart it);
// t.Cleanup stops it and removes its folder. A missing PostgreSQL fails t
// with the command that installs it.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// NewDatabase creates an empty database t_<random hex> on s (the shared
// server when nil) and returns its URL; the database is left to go with
// the server. Options, when given, follow the name in CREATE DATABASE (a
// locale: the server's is C).
func NewDatabase(t testing.TB, s *Server, options ...string) string {
	t.Helper()
	if s == nil {
		s = Shared(t)
	}
	url, err := s.CreateDatabase(options...)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// CreateDatabase creates an empty database t_<random hex>, options
// following its name in CREATE DATABASE, and returns its URL.
func (s *Server) CreateDatabase(options ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(ctx)
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, strings.Join(append([]string{"CREATE DATABASE", name}, options...), " ")); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return s.URL(name), nil
}
