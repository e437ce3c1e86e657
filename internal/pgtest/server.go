// Package pgtest runs real PostgreSQL servers for tests, from Debian's
// postgresql package: initdb into a temp folder, then postgres itself as a
// child process (internal/childproc: it dies with the test binary), on a
// free loopback port, with trust authentication. initdb and postgres
// refuse to run as root, so when the tests run as root the folder is given
// to the postgres user and the binaries run as that user.
//
// One server per test binary (Main, Shared) with one database per test
// (NewDatabase) is the usual shape; a test that stops or restarts its
// server starts its own (Start).
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ingestq/ingestq/internal/childproc"
	"github.com/ingestq/ingestq/internal/freeport"
)

// installHint is what a test prints when PostgreSQL is missing.
const installHint = "install it with:\n\t./scripts/install-postgres.sh   (apt-get update && apt-get install -y postgresql)"

const (
	startTries   = 3 // attempts with fresh ports when a port was taken
	startTimeout = 60 * time.Second
)

// installRoot holds a folder per installed major version (Debian's layout).
var installRoot = "/usr/lib/postgresql"

// Installed returns the folder of the newest PostgreSQL server binaries
// (/usr/lib/postgresql/<version>/bin with initdb and postgres), or an error
// naming the command that installs them.
func Installed() (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(installRoot, "*", "bin"))
	slices.SortFunc(dirs, func(a, b string) int { return majorVersion(b) - majorVersion(a) })
	for _, dir := range dirs {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgtest: PostgreSQL is not installed (no %s/<version>/bin/initdb); %s", installRoot, installHint)
}

// majorVersion is the <version> of /usr/lib/postgresql/<version>/bin.
func majorVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// Server is a PostgreSQL server whose data, socket and log live in one
// temp folder.
type Server struct {
	Port int // on 127.0.0.1; kept across Stop and Restart

	bin  string // the binaries' folder
	dir  string // holds data/, the socket and postgres.log
	proc *childproc.Proc
}

// StartServer makes a temp folder, runs initdb in it and starts the server
// on a free port. Close stops it and removes the folder.
func StartServer() (*Server, error) {
	bin, err := Installed()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{bin: bin, dir: dir}
	// SIGINT is PostgreSQL's fast shutdown: clients are cut, the data is
	// written out. (SIGTERM would wait for every client to leave.)
	s.proc = &childproc.Proc{Name: "pgtest: postgres", LogPath: s.LogPath(), PortTaken: "could not bind", StopSignal: syscall.SIGINT}
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for try := 0; try < startTries; try++ {
		if s.Port, err = freePort(); err != nil {
			break
		}
		if err = s.Restart(); !errors.Is(err, childproc.ErrPortTaken) {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "postgres.log") }

// init gives the folder to the postgres user when running as root, and
// runs initdb: UTF-8, no locale, trust authentication, superuser postgres.
func (s *Server) init() error {
	if os.Geteuid() == 0 {
		if err := chownToPostgres(s.dir); err != nil {
			return err
		}
	}
	cmd := s.command("initdb", "-D", s.dataDir(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, tail(string(out), 20))
	}
	return nil
}

func chownToPostgres(dir string) error {
	cred, err := postgresUser()
	if err != nil {
		return err
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// postgresUser is the credential of the postgres user, which the package
// makes.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs the postgres user, which the package makes: %w; %s", err, installHint)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command is one of the server's binaries, run in the server's folder, as
// the postgres user when root.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if os.Geteuid() == 0 {
		cred, _ := postgresUser() // found by chownToPostgres already
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd
}

// Dump is a backup of the database at url as an operator takes one:
// pg_dump -Fc, the custom format pg_restore reads.
func (s *Server) Dump(url string) ([]byte, error) {
	out, err := s.command("pg_dump", "-Fc", "-d", url).Output()
	if err != nil {
		return nil, fmt.Errorf("pgtest: pg_dump: %w%s", err, stderrOf(err))
	}
	return out, nil
}

// Restore puts the database at url back as dump (Dump) holds it:
// pg_restore --clean, every table it names dropped and made again.
func (s *Server) Restore(url string, dump []byte) error {
	cmd := s.command("pg_restore", "--clean", "--if-exists", "-d", url)
	cmd.Stdin = bytes.NewReader(dump)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_restore: %w\n%s", err, tail(string(out), 20))
	}
	return nil
}

// stderrOf is the tail of what a command that failed wrote to stderr.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		return "\n" + tail(string(exit.Stderr), 20)
	}
	return ""
}

// Restart starts the server, stopping it first if it runs, on the same
// port and data, and waits until it accepts connections.
func (s *Server) Restart() error {
	if err := s.proc.Stop(); err != nil {
		return err
	}
	// fsync off: the data is thrown away, and a fast stop still writes
	// everything out, so a restart loses nothing.
	cmd := s.command("postgres", "-D", s.dataDir(), "-p", strconv.Itoa(s.Port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	if err := s.proc.Start(cmd); err != nil {
		return err
	}
	err := s.proc.WaitReady(s.accepts, time.Now().Add(startTimeout))
	if err != nil {
		_ = s.proc.Kill()
	}
	return err
}

// accepts reports whether the server answers a query: it listens a moment
// before it is ready, and answers "starting up" till then.
func (s *Server) accepts() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx) == nil
}

// Stop stops the server (a fast shutdown: connections are cut, the data is
// written out). It does nothing when the server is not running.
func (s *Server) Stop() error { return s.proc.Stop() }

// Freeze stops every process of the server with SIGSTOP: connections stay
// open and nothing answers, as on a hung host. Thaw undoes it.
func (s *Server) Freeze() error { return s.proc.Freeze() }

// Thaw continues a frozen server.
func (s *Server) Thaw() error { return s.proc.Thaw() }

// Close stops the server and removes its folder.
func (s *Server) Close() error {
	err := s.Stop()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// URL is the address of database db on the server, for pgx.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

func freePort() (int, error) {
	p, err := freeport.Port()
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	return p, nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
