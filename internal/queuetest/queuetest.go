// Package queuetest opens what the tests of the packages above the queue
// each need: a session on the shared test ZooKeeper, as a daemon's, and a
// queue on it, closed when the test ends.
package queuetest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// Session dials the test binary's shared ZooKeeper (zktest.WithShared) with
// zktest.SessionTimeout and logging to log; t.Cleanup closes it.
func Session(t testing.TB, log *slog.Logger) *zkwatch.Session {
	t.Helper()
	s, err := zkwatch.Dial(context.Background(), zkwatch.Config{Servers: []string{zktest.Shared(t).Addr},
		SessionTimeout: zktest.SessionTimeout, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Queue opens the queue under root on s and makes its folders. Like the
// daemon's, it knows when s is closed (WithClosed): what it runs in the
// background then stops, which a closed connection alone does not tell.
func Queue(t testing.TB, s *zkwatch.Session, root string, log *slog.Logger) *queue.Queue {
	t.Helper()
	q, err := queue.New(s.Conn, root, queue.WithLogger(log), queue.WithClosed(s.Closed))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return q
}

// AwaitHostNode waits until host's node on q, read as a T (a
// reactor.HostInfo), says what cond looks for, failing after within.
func AwaitHostNode[T any](t testing.TB, q *queue.Queue, host string, within time.Duration, what string, cond func(T) bool) {
	t.Helper()
	deadline := time.After(within)
	_, _, wait, err := q.LiveHost(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	for {
		fired, _, err := q.WatchOnce(t.Context(), wait) // set before the read: no change missed
		if err != nil {
			t.Fatal(err)
		}
		h, alive, _, err := q.LiveHost(t.Context(), host)
		var info T
		if err == nil && alive && json.Unmarshal(h.Data, &info) == nil && cond(info) {
			return
		}
		select {
		case <-fired:
		case <-deadline:
			t.Fatalf("after %v, %s's node says %s; want %s", within, host, h.Data, what)
		}
	}
}

// OnRequest is a log handler for a queue (queue.WithLogger) calling hook
// with the op ("get", "multi" …) and the path of each ZooKeeper request
// the queue logs (at debug level, before it is sent): a test acts between
// two of the queue's requests.
type OnRequest func(op, path string)

func (h OnRequest) Enabled(context.Context, slog.Level) bool { return true }
func (h OnRequest) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "zookeeper request" {
		return nil
	}
	var op, path string
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "op":
			op = a.Value.String()
		case "path":
			path = a.Value.String()
		}
		return true
	})
	h(op, path)
	return nil
}
func (h OnRequest) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h OnRequest) WithGroup(string) slog.Handler      { return h }
