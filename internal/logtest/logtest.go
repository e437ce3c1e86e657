// Package logtest keeps a log that a test reads while the code under test
// is still writing it, and lets the test wait for a line.
package logtest

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds WaitFor: only a bug waits this long.
const waitLimit = time.Minute

// Buffer is an io.Writer for a logger (or a command's stderr). It is safe
// for concurrent use.
type Buffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{} // closed and cleared by the next write
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notify != nil {
		close(b.notify)
		b.notify = nil
	}
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far that hold every one of subs.
func (b *Buffer) Lines(subs ...string) []string {
	return linesWith(b.String(), subs)
}

// WaitFor waits until a line holds every one of subs, and returns it; the
// test fails after a minute without one.
func (b *Buffer) WaitFor(t testing.TB, subs ...string) string {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		if b.notify == nil {
			b.notify = make(chan struct{})
		}
		ch, text := b.notify, b.buf.String()
		b.mu.Unlock()
		if lines := linesWith(text, subs); len(lines) > 0 {
			return lines[0]
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no log line with %q after %v; the log:\n%s", subs, waitLimit, text)
		}
	}
}

func linesWith(text string, subs []string) []string {
	var out []string
lines:
	for _, line := range strings.Split(text, "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue lines
			}
		}
		out = append(out, line)
	}
	return out
}
