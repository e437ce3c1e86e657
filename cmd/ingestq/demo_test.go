package main_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `make demo` is the README's first command: the binary's demo runs on the
// repository's sample content, from start to clean stop. `make demo-cluster`
// runs it with three hosts, and shows each job started by the first host
// and its steps from Downloading on run by another, the one that
// downloaded its files. The demo removes what it made in its --dir, and
// the folder when it made that too, and nothing else.
func TestDemo(t *testing.T) {
	for _, hosts := range []string{"1", "3"} {
		t.Run("hosts="+hosts, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir() // there, and empty
			if hosts == "1" {
				dir = filepath.Join(dir, "new") // made by the demo
			}
			text := runDemo(t, dir, "--hosts", hosts)
			if hosts == "3" {
				assertWhoRanWhat(t, text)
			}
			// The daemons and the inventory server log into files: no log
			// line breaks up the deposit's progress.
			if strings.Contains(text, " INF ") {
				t.Errorf("a log line in the demo's output:\n%s", text)
			}
			entries, err := os.ReadDir(dir)
			switch {
			case hosts == "1" && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("the --dir the demo made is still there (%v, %d entries)", err, len(entries))
			case hosts == "3" && (err != nil || len(entries) > 0):
				t.Errorf("the given --dir after the demo: %v, %v; want it there, empty", entries, err)
			}
		})
	}
}

// A --dir that holds anything is refused before the demo starts, and left
// as it was: the demo removes what it made, and it cannot tell that apart
// from what was there.
func TestDemoRefusesANonEmptyDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mine := filepath.Join(dir, "thesis.tex")
	if err := os.WriteFile(mine, []byte("years of work"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := demoCommand(t.Context(), dir).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("ingestq demo --dir with a file in it: %v, want exit 2\n%s", err, out)
	}
	if want := "ingestq: --dir " + dir + " is not empty (it holds thesis.tex)"; !strings.Contains(string(out), want) {
		t.Errorf("output %q lacks %q", out, want)
	}
	if b, err := os.ReadFile(mine); err != nil || string(b) != "years of work" {
		t.Errorf("the file in --dir after the demo: %q, %v", b, err)
	}
}

// A daemon that fails to start ends the demo with its exit code and log,
// and the demo cleans up: it waited without end (its wait for the daemon
// took the exit code its stop then waited for).
func TestDemoSaysADaemonThatFailsToStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "new")
	cmd := demoCommand(ctx, dir)
	cmd.Env = append(os.Environ(), "INGESTQ_API_TOKENS="+filepath.Join(t.TempDir(), "no-such-file"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || ctx.Err() != nil {
		t.Fatalf("ingestq demo with a daemon that cannot start: %v (deadline: %v), want exit 1\n%s", err, ctx.Err(), out)
	}
	// The log is said, as the folder is removed: it names the file missing.
	for _, want := range []string{"ingestq: the daemon did not start (it exited 2); its log, " + filepath.Join(dir, "daemon.log") + ", ends:",
		"no-such-file"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the demo's folder after it: %v, want it removed", err)
	}
}

// demoCommand is `ingestq demo` of the demo's content into dir. One that
// does not end by ctx's deadline (it takes seconds) is stopped by SIGQUIT,
// whose goroutine dump lands in its output, rather than holding the
// package until its timeout says only "TestDemo".
func demoCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, ingestqBin, append([]string{"demo", "--content", filepath.Join("..", "..", "testdata", "demo"), "--dir", dir}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 30 * time.Second
	return cmd
}

func runDemo(t *testing.T, dir string, args ...string) string {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := demoCommand(ctx, dir, args...).CombinedOutput()
	text := string(out)
	if err != nil {
		if known, unknown := races(text); len(known) == 0 || len(unknown) > 0 {
			t.Fatalf("ingestq demo: %v\n%s", err, text)
		}
	}
	for _, want := range []string{
		"4/4 jobs finished (3 completed, 1 failed)",
		"md5 mismatch: want 00000000000000000000000000000000",
		"== Storage: 3 OCFL 1.1 objects in the storage root",
		"== Inventory: 3 objects",
		"demo-poems", "demo-letters", "demo-maps",
		"Done.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	// The batch report names the failed job's object (demo-photos); the
	// inventory's table of objects, the last step's, must not.
	if inv := text[strings.LastIndex(text, "== Inventory:")+1:]; strings.Contains(inv, "demo-photos") {
		t.Errorf("the object with the wrong digest was stored:\n%s", text)
	}
	return text
}

// assertWhoRanWhat reads the demo's table of the host that ran each step:
// a row per job, its first steps on host1, and from Downloading on every
// step on the other host that downloaded its files.
func assertWhoRanWhat(t *testing.T, text string) {
	_, table, ok := strings.Cut(text, "== Who ran what")
	if !ok {
		t.Fatalf("no table of who ran what:\n%s", text)
	}
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Fields(line)
		if len(cells) != 8 || !strings.HasPrefix(cells[0], "jid") {
			continue
		}
		rows++
		if cells[1] != "host1" || cells[2] != "host1" {
			t.Errorf("%s: Estimating and Provisioning ran on %s and %s, not on host1 (the only host working them): %q", cells[0], cells[1], cells[2], line)
		}
		downloader := cells[3]
		if downloader == "host1" || downloader == "-" {
			t.Errorf("%s: downloaded by %s, not by host2 or host3 (the hosts working Downloading): %q", cells[0], downloader, line)
		}
		for _, host := range cells[4:] {
			if host != "-" && host != downloader {
				t.Errorf("%s: a step after Downloading ran on %s, not on %s which holds its files: %q", cells[0], host, downloader, line)
			}
		}
	}
	if rows != 4 {
		t.Errorf("%d jobs in the table of who ran what, want 4:\n%s", rows, table)
	}
}
