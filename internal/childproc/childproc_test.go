package childproc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newProc(t *testing.T) *Proc {
	p := &Proc{Name: "test: sh", LogPath: filepath.Join(t.TempDir(), "sh.log"), PortTaken: "address already in use"}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func never() bool { return false }

// A program that exits saying its port is taken fails WaitReady with
// ErrPortTaken and its words, at once rather than at the deadline.
func TestPortTakenIsRecognised(t *testing.T) {
	p := newProc(t)
	if err := p.Start(exec.Command("sh", "-c", "echo 'listen tcp 127.0.0.1:9: bind: address already in use'; exit 1")); err != nil {
		t.Fatal(err)
	}
	err := p.WaitReady(never, time.Now().Add(time.Hour))
	if !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), "bind: address already in use") {
		t.Fatalf("WaitReady: %v; want ErrPortTaken with the log line", err)
	}
}

// Kill reaches the program's whole process group: a child it started dies
// with it. The log's tail is the current run's only.
func TestKillReachesTheGroupAndTheTailIsTheRun(t *testing.T) {
	p := newProc(t)
	if err := p.Start(exec.Command("sh", "-c", "echo first run; exec sleep 300")); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(func() bool { return strings.Contains(p.LogTail(), "first run") }, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(exec.Command("sh", "-c", "sleep 300 & echo child $!; wait")); err != nil {
		t.Fatal(err)
	}
	var child int
	ready := func() bool {
		f := strings.Fields(p.LogTail())
		if len(f) == 2 && f[0] == "child" {
			child, _ = strconv.Atoi(f[1])
		}
		return child > 0
	}
	if err := p.WaitReady(ready, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if tail := p.LogTail(); strings.Contains(tail, "first run") {
		t.Fatalf("log tail %q holds the first run's output", tail)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for alive(child) { // its reaping by init is not ours to wait on
		if time.Now().After(deadline) {
			t.Fatalf("the program's child %d outlived Kill", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive tells whether pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
