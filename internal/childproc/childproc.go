// Package childproc runs a test's server program (ZooKeeper, versitygw,
// PostgreSQL, or the test binary itself as one of the project's servers:
// StartSelf) as a child process: its output appended to a log file, ready
// once a probe answers, stopped by a signal to its process group (SIGTERM or
// the program's own, then SIGKILL), and killed by the kernel when the test
// binary dies (on Linux).
package childproc

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrPortTaken marks a start that failed because the program's port was
// taken between the moment it was found free and the program's bind: the
// caller tries again on another port.
var ErrPortTaken = errors.New("port already in use")

const (
	pollInterval = 20 * time.Millisecond
	stopTimeout  = 10 * time.Second
	tailLines    = 40 // of the log, in errors
)

// Proc is one server program, started and stopped any number of times.
type Proc struct {
	Name      string // in messages, e.g. "zktest: server 127.0.0.1:2181"
	LogPath   string // the program's output, appended run after run
	PortTaken string // what the program logs when its port is taken
	// StopSignal is what Stop sends first; SIGTERM when zero. (PostgreSQL
	// takes SIGINT for a fast shutdown: SIGTERM waits for its clients.)
	StopSignal syscall.Signal

	mu       sync.Mutex
	cmd      *exec.Cmd     // nil when not running
	done     chan struct{} // closed when cmd has exited
	logStart int64         // the log's size when cmd was started
}

// Start starts cmd, its output going to LogPath, without waiting for it to
// serve. cmd's own SysProcAttr (a Credential, say) is kept.
func (p *Proc) Start(cmd *exec.Cmd) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.Name)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child keeps its own descriptor
	if fi, err := logf.Stat(); err == nil {
		p.logStart = fi.Size()
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	ownGroupDyingWithUs(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.Name, cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	return nil
}

// WaitReady polls ready until it answers true, failing at once when the
// program exits (with ErrPortTaken when its log says the port was taken),
// and at the deadline.
func (p *Proc) WaitReady(ready func() bool, deadline time.Time) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	for {
		if ready() {
			return nil
		}
		select {
		case <-done:
			tail := p.LogTail()
			err := fmt.Errorf("%s exited before serving; log %s:\n%s", p.Name, p.LogPath, tail)
			if p.PortTaken != "" && strings.Contains(tail, p.PortTaken) {
				err = fmt.Errorf("%w: %w", ErrPortTaken, err)
			}
			return err
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not serving in time; log %s:\n%s", p.Name, p.LogPath, p.LogTail())
		}
	}
}

// Stop sends StopSignal (SIGTERM) to the program's process group and waits
// for it to exit, escalating to SIGKILL after 10 s. It is a no-op when the
// program is not running.
func (p *Proc) Stop() error { return p.stop(cmp.Or(p.StopSignal, syscall.SIGTERM)) }

// Kill sends SIGKILL to the program's process group and waits for it to
// exit. It is a no-op when the program is not running.
func (p *Proc) Kill() error { return p.stop(syscall.SIGKILL) }

// Freeze stops the program's process group with SIGSTOP, as an operator
// or a hung host would: its sockets stay open and nothing answers. Thaw
// (or Stop, Kill) lets it run again.
func (p *Proc) Freeze() error { return p.signal(syscall.SIGSTOP) }

// Thaw continues a frozen program (SIGCONT).
func (p *Proc) Thaw() error { return p.signal(syscall.SIGCONT) }

func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("%s: signal %v: %w", p.Name, sig, err)
	}
	for _, child := range Descendants(pid) { // PostgreSQL's backends leave the group (setsid)
		_ = syscall.Kill(child, sig)
	}
	return nil
}

// Descendants are the processes below pid, from /proc (none elsewhere).
func Descendants(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	parent := map[int]int{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		var id, ppid int
		var state string
		after := string(b[strings.LastIndexByte(string(b), ')')+1:])
		if _, err := fmt.Sscan(after, &state, &ppid); err == nil {
			id, _ = strconv.Atoi(filepath.Base(filepath.Dir(path)))
			parent[id] = ppid
		}
	}
	var out []int
	for id := range parent {
		for p := parent[id]; p > 1; p = parent[p] {
			if p == pid {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

func (p *Proc) stop(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	pgid := p.cmd.Process.Pid // Setpgid: the group id is the leader's pid
	_ = syscall.Kill(-pgid, sig)
	_ = syscall.Kill(-pgid, syscall.SIGCONT) // a frozen program takes its signal only once continued
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			return fmt.Errorf("%s (pid %d) did not exit", p.Name, pgid)
		}
	}
	p.cmd, p.done = nil, nil
	return nil
}

// LogTail is the last lines the current (or last) run logged.
func (p *Proc) LogTail() string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	p.mu.Lock()
	start := p.logStart
	p.mu.Unlock()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return err.Error()
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > tailLines {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
