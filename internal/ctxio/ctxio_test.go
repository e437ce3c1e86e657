package ctxio

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Reader passes reads through while its context lives, and fails every
// read with the context's error once it ends.
func TestReaderStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, strings.NewReader("abcdef"))
	p := make([]byte, 3)
	if n, err := r.Read(p); n != 3 || err != nil || string(p) != "abc" {
		t.Fatalf("first read: %d %v %q, want 3 <nil> \"abc\"", n, err, p)
	}
	cancel()
	for range 2 {
		if n, err := r.Read(p); n != 0 || !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: %d %v, want 0 and context.Canceled", n, err)
		}
	}
	if _, err := io.ReadAll(Reader(context.Background(), strings.NewReader("xyz"))); err != nil {
		t.Fatalf("a live context: %v", err)
	}
}
