package events

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A taken listening port is named at once. The readiness timeout is 10
// minutes here: an Open that waited for it would hang the test (until go
// test's own timeout) rather than pass.
func TestEmbeddedPortTaken(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	addr := l.Addr().String()
	_, err = Open(t.Context(), Config{DataDir: t.TempDir(), Listen: addr, Logger: discardLogger(), readyTimeout: 10 * time.Minute})
	if !errors.Is(err, ErrListen) {
		t.Fatalf("Open on a taken port: %v, want ErrListen", err)
	}
	for _, want := range []string{addr, "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// A server that gives up while starting (here: its JetStream store cannot
// be made) is an error at once, with the server's reason, not a wait for
// the readiness timeout.
func TestEmbeddedGivesUp(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), Config{DataDir: file, Listen: "127.0.0.1:0", Logger: discardLogger(), readyTimeout: 10 * time.Minute})
	if err == nil || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("Open with a file as the data directory: %v, want the server's JetStream error", err)
	}
}
