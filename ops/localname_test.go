package ops

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
)

// A local payload under type auto whose name intake refuses is read (its
// first bytes) to tell whether it would be stored under that name: a pipe
// so named is not a file to read, and is left to the daemon that fetches
// it, at once. The open waited for a writer that never came, and with it
// the API's request (POST /batches) or ingestq submit, for good.
func TestLocalNameRefusedWaitsOnNoPipe(t *testing.T) {
	t.Parallel()
	pipe := filepath.Join(t.TempDir(), "p|q")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, refused := LocalNameRefused(pipe, handlers.SubmitAuto)
		done <- refused
	}()
	select {
	case refused := <-done:
		if refused != nil {
			t.Errorf("a pipe named %q under type auto: %v, want it left to the daemon (nil)", filepath.Base(pipe), refused)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LocalNameRefused of a pipe still reading after 10 s")
	}
}
