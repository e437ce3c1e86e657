package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// exitBrokenPipe is the exit code of a demo whose output's reader went
// (`ingestq demo | head`): a shell's code for a process SIGPIPE ended
// (128 + 13), which the demo would have been without its clean-up.
const exitBrokenPipe = 128 + 13

// outputCutError is the first write to the demo's stdout that failed: its
// reader is gone (a pipe closed), or it cannot take more.
type outputCutError struct{ err error }

func (e *outputCutError) Error() string {
	return fmt.Sprintf("the demo's output cannot be written (%v): it stopped", e.err)
}

// cutWriter passes writes to w, and stops the demo at the first that
// fails: it cancels the demo's context with an outputCutError as cause.
type cutWriter struct {
	w    io.Writer
	stop context.CancelCauseFunc
}

func (c *cutWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.stop(&outputCutError{err})
	}
	return n, err
}

// stopWhenOutputCut makes the demo stop, and clean up, when its stdout is
// cut, rather than die: the Go runtime ends a process whose write to fd 1
// or 2 meets a closed pipe (SIGPIPE) unless SIGPIPE is asked for, and then
// the write fails with EPIPE instead. It replaces a.stdout until release,
// which lets SIGPIPE end the process again.
func (a *app) stopWhenOutputCut(ctx context.Context) (_ context.Context, release func()) {
	sigpipe := make(chan os.Signal, 1) // never read: asking is what counts
	signal.Notify(sigpipe, syscall.SIGPIPE)
	ctx, stop := context.WithCancelCause(ctx)
	stdout := a.stdout
	a.stdout = &cutWriter{w: stdout, stop: stop}
	return ctx, func() {
		a.stdout = stdout
		stop(nil)
		signal.Stop(sigpipe)
	}
}

// outputCut is the exit of a demo whose stdout was cut (nil when it was
// not): silent, 141, when its reader went; else the error that says so.
func outputCut(ctx context.Context) error {
	var cut *outputCutError
	switch {
	case !errors.As(context.Cause(ctx), &cut):
		return nil
	case errors.Is(cut.err, syscall.EPIPE):
		return &exitError{code: exitBrokenPipe, silent: true, err: cut}
	}
	return &exitError{code: 1, err: cut}
}
