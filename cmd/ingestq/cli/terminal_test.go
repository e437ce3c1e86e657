//go:build linux

package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ingestq/ingestq/cmd/ingestq/cli"
	"github.com/ingestq/ingestq/internal/logtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// openTerminal opens a pseudo-terminal: what the command writes to tty, the
// test reads back in screen, as a terminal would show it.
func openTerminal(t *testing.T) (tty *os.File, screen func() []string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	var n uint32
	ctl := func(req uintptr, arg unsafe.Pointer) {
		raw, err := master.SyscallConn()
		if err == nil {
			err = raw.Control(func(fd uintptr) {
				if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg)); errno != 0 {
					err = errno
				}
			})
		}
		if err != nil {
			t.Fatalf("pseudo-terminal ioctl %#x: %v", req, err)
		}
	}
	var unlock int32
	ctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	ctl(syscall.TIOCGPTN, unsafe.Pointer(&n))
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open /dev/pts/%d: %v", n, err)
	}
	var out logtest.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			k, err := master.Read(buf)
			_, _ = out.Write(buf[:k])
			if err != nil {
				return // EIO once the terminal side is closed
			}
		}
	}()
	t.Cleanup(func() {
		tty.Close()
		<-read
		master.Close()
	})
	return tty, func() []string { return screenLines(out.String()) }
}

// screenLines is what a terminal shows of out: a carriage return goes back
// to the line's start, ESC[K erases to its end, other escape sequences
// (colours) show nothing.
func screenLines(out string) []string {
	var lines []string
	var line []rune
	col := 0
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\n':
			lines = append(lines, string(line))
			line, col = nil, 0
		case r == '\r':
			col = 0
		case r == '\x1b' && i+1 < len(rs) && rs[i+1] == '[':
			j := i + 2
			for j < len(rs) && (rs[j] < '@' || rs[j] > '~') {
				j++
			}
			if j < len(rs) && rs[j] == 'K' {
				line = line[:col]
			}
			i = j
		default:
			if col < len(line) {
				line[col] = r
			} else {
				line = append(line, r)
			}
			col++
		}
	}
	return append(lines, string(line))
}

// On a terminal the progress line is redrawn in place. A warning printed
// meanwhile (here: the daemon's NATS goes away) starts on a line of its own,
// and the progress line is drawn again below it. Ctrl-C then exits 130.
func TestSubmitWaitWarningOnATerminal(t *testing.T) {
	t.Parallel()
	d := newDaemon(t) // no reactor: the batch stays Pending
	tty, screen := openTerminal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var out logtest.Buffer
	args := []string{"--zk", zktest.Shared(t).Addr, "--zk-root", d.root, "--nats", d.bus.ClientURL(),
		"submit", "--profile", "demo", "--wait", "passthrough:3"}
	go func() { done <- cli.Run(ctx, args, &out, tty, func(string) string { return "" }) }()

	// waitScreen waits until the terminal shows what, after any line that
	// holds after.
	waitScreen := func(after, what string) {
		t.Helper()
		shows := func() bool {
			text := strings.Join(screen(), "\n")
			_, rest, found := strings.Cut(text, after)
			return found && strings.Contains(rest, what)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !shows() {
			select {
			case code := <-done:
				t.Fatalf("submit --wait ended (exit %d) before the terminal showed %q:\n%s", code, what, strings.Join(screen(), "\n"))
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the terminal never showed %q:\n%s", what, strings.Join(screen(), "\n"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitScreen("", "jobs finished")
	if err := d.bus.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Logf("closing the daemon's bus: %v", err)
	}
	waitScreen("connection lost", "\n[--------------------] 0/? jobs finished")
	cancel()
	select {
	case code := <-done:
		wantCode(t, code, 130)
	case <-time.After(20 * time.Second):
		t.Fatal("submit --wait did not end on Ctrl-C")
	}

	lines := screen()
	t.Logf("the terminal shows:\n%s", strings.Join(lines, "\n"))
	warning := -1
	for i, l := range lines {
		if strings.Contains(l, "connection lost") {
			warning = i
			if strings.Contains(l, "jobs finished") || !strings.Contains(l, "WRN") {
				t.Errorf("line %q: the warning shares its line with the progress", l)
			}
		}
	}
	if warning < 0 || !strings.HasPrefix(lines[warning+1], "[--------------------] 0/? jobs finished") {
		t.Errorf("want the warning, and the progress line drawn again below it")
	}
}
