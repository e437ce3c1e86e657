// Package pgtest runs real PostgreSQL servers for tests, from Debian's
// postgresql package: initdb and pg_ctl into a temp folder, on a free
// loopback port, with trust authentication. initdb and postgres refuse to
// run as root, so when the tests run as root the folder is given to the
// postgres user and the binaries run through runuser.
//
// One server per test binary (Main, Shared) with one database per test
// (NewDatabase) is the usual shape; a test that stops or restarts its
// server starts its own (Start).
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// installHint is what a test prints when PostgreSQL is missing.
const installHint = "install it with:\n\t./scripts/install-postgres.sh   (apt-get update && apt-get install -y postgresql)"

const startTries = 3 // attempts with fresh ports when a port was taken

// installRoot holds a folder per installed major version (Debian's layout).
var installRoot = "/usr/lib/postgresql"

// Installed returns the folder of the newest PostgreSQL server binaries
// (/usr/lib/postgresql/<version>/bin with initdb and pg_ctl), or an error
// naming the command that installs them.
func Installed() (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(installRoot, "*", "bin"))
	slices.SortFunc(dirs, func(a, b string) int { return majorVersion(b) - majorVersion(a) })
	for _, dir := range dirs {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "pg_ctl")) {
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

	bin string // the binaries' folder
	dir string // holds data/, the socket and postgres.log

	mu      sync.Mutex
	running bool
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
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for try := 0; try < startTries; try++ {
		if s.Port, err = freePort(); err != nil {
			break
		}
		if err = s.Restart(); !errors.Is(err, errPortTaken) {
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
	return s.run("initdb", "-D", s.dataDir(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync")
}

func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgtest: running as root needs the postgres user, which the package makes: %w; %s", err, installHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

var errPortTaken = errors.New("pgtest: port already in use")

// Restart starts the server, stopping it first if it runs, on the same
// port and data, and waits until it accepts connections.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopLocked(); err != nil {
		return err
	}
	// fsync off: the data is thrown away, and a fast stop still writes
	// everything out, so a restart loses nothing.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
		s.Port, s.dir)
	err := s.run("pg_ctl", "-D", s.dataDir(), "-l", s.LogPath(), "-w", "-t", "60", "-o", opts, "start")
	if err != nil {
		log, _ := os.ReadFile(s.LogPath())
		if strings.Contains(string(log), "could not bind") || strings.Contains(string(log), "already in use") {
			return fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return fmt.Errorf("%w; log %s:\n%s", err, s.LogPath(), tail(string(log), 20))
	}
	s.running = true
	return nil
}

// Stop stops the server (pg_ctl -m fast: connections are cut, the data is
// written out). It does nothing when the server is not running.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	if !s.running {
		return nil
	}
	if err := s.run("pg_ctl", "-D", s.dataDir(), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return err
	}
	s.running = false
	return nil
}

// Close stops the server and removes its folder.
func (s *Server) Close() error {
	err := s.Stop()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// URL is the address of database db on the server, for pgx.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// run runs one of the server's binaries, as the postgres user when root.
func (s *Server) run(name string, args ...string) error {
	path := filepath.Join(s.bin, name)
	cmd := exec.Command(path, args...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: %s %s: %w\n%s", name, strings.Join(args, " "), err, tail(string(out), 20))
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
