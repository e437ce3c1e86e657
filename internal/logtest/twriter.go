package logtest

import (
	"strings"
	"sync"
	"testing"
)

// T is an io.Writer for a logger that passes each write to t.Log until the
// test's last cleanup, so that the goroutines a test leaves to its
// cleanups never log into a finished test.
type T struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

// NewT makes a T for t.
func NewT(t testing.TB) *T {
	l := &T{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() }) // registered first: runs last
	return l
}

func (l *T) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
