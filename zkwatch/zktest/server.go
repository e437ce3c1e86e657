// Package zktest runs real ZooKeeper servers (Debian's zookeeper package,
// launched directly with java) for tests: a standalone Server, a loopback
// Ensemble, and helpers for a per-test-binary shared server (WithShared, Shared,
// Connect, Root).
package zktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ingestq/ingestq/internal/childproc"
	"github.com/ingestq/ingestq/internal/freeport"
)

// Paths of the Debian zookeeper jars; zookeeper.jar's manifest Class-Path
// pulls in the rest of its dependencies.
const (
	zookeeperJar   = "/usr/share/java/zookeeper.jar"
	slf4jSimpleJar = "/usr/share/java/slf4j-simple.jar"
)

const (
	standaloneMain = "org.apache.zookeeper.server.ZooKeeperServerMain"
	quorumMain     = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

	readyTimeout = 30 * time.Second
	startTries   = 3 // attempts with fresh ports when a port was taken
)

// javaArgs keep the JVM light and quick to start on a small machine.
var javaArgs = []string{
	"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
	"-XX:-UsePerfData", // no /tmp/hsperfdata_* files
	"-Dzookeeper.jmx.log4j.disable=true",
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
	"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
}

// Installed reports nil when java and the ZooKeeper jars are present, else an
// error naming the command that installs them.
func Installed() error {
	var missing []string
	for _, jar := range []string{zookeeperJar, slf4jSimpleJar} {
		if _, err := os.Stat(jar); err != nil {
			missing = append(missing, jar)
		}
	}
	if _, err := exec.LookPath("java"); err != nil {
		missing = append(missing, "java on PATH")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("zktest: ZooKeeper is not installed (missing %s); install it with:\n\t%s",
		strings.Join(missing, ", "), installCommand())
}

func installCommand() string {
	cmd := "apt-get update && apt-get install -y zookeeper"
	if os.Geteuid() != 0 {
		cmd = "sudo apt-get update && sudo apt-get install -y zookeeper"
	}
	return cmd
}

// Server is a standalone ZooKeeper process (or one member of an Ensemble).
type Server struct {
	// Addr is the client address, "127.0.0.1:port"; it survives Restart.
	Addr string

	dir       string // holds zoo.cfg, data/ and zookeeper.log
	mainClass string
	proc      *childproc.Proc
}

// StartServer starts a standalone server whose config, data and log live in
// dir, on a free loopback port, and waits until it serves.
func StartServer(dir string) (*Server, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	var err error
	for try := 0; try < startTries; try++ {
		var ports []int
		if ports, err = freePorts(1); err != nil {
			return nil, err
		}
		s := newServer(dir, standaloneMain, ports[0])
		if err = writeConfig(s, ports[0], nil, 0); err != nil {
			return nil, err
		}
		if err = s.Restart(); err == nil {
			return s, nil
		}
		if !errors.Is(err, childproc.ErrPortTaken) {
			break
		}
	}
	return nil, err
}

func newServer(dir, mainClass string, clientPort int) *Server {
	addr := fmt.Sprintf("127.0.0.1:%d", clientPort)
	return &Server{
		Addr:      addr,
		dir:       dir,
		mainClass: mainClass,
		proc: &childproc.Proc{Name: "zktest: server " + addr, LogPath: filepath.Join(dir, "zookeeper.log"),
			PortTaken: "Address already in use"},
	}
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) cfgPath() string { return filepath.Join(s.dir, "zoo.cfg") }

// LogPath is the file that collects the server's output.
func (s *Server) LogPath() string { return s.proc.LogPath }

// Stop sends SIGTERM to the server's process group and waits for it to exit,
// escalating to SIGKILL after 10 s. It is a no-op when the server is not running.
func (s *Server) Stop() error { return s.proc.Stop() }

// Kill sends SIGKILL to the server's process group and waits for it to exit.
// It is a no-op when the server is not running.
func (s *Server) Kill() error { return s.proc.Kill() }

// Restart starts the server again, on the same port and data dir, after Stop
// or Kill, and waits until it serves.
func (s *Server) Restart() error {
	if err := s.launch(); err != nil {
		return err
	}
	if err := s.waitReady(time.Now().Add(readyTimeout)); err != nil {
		_ = s.Kill()
		return err
	}
	return nil
}

// Reload stops the server, calls change on its data folder (to copy it, put
// an older copy back or wipe it, as an operator does with it stopped), and
// starts it again.
func (s *Server) Reload(change func(data string) error) error {
	if err := s.Stop(); err != nil {
		return err
	}
	if err := change(s.dataDir()); err != nil {
		return fmt.Errorf("zktest: data folder of %s: %w", s.Addr, err)
	}
	return s.Restart()
}

// CopyDataTo is a change for Reload that copies the data folder to dir, as
// an operator's backup of a stopped server.
func CopyDataTo(dir string) func(data string) error {
	return func(data string) error { return os.CopyFS(dir, os.DirFS(data)) }
}

// RestoreDataFrom is a change for Reload that puts dir, a copy CopyDataTo
// made, back in place of the data folder.
func RestoreDataFrom(dir string) func(data string) error {
	return func(data string) error {
		if err := os.RemoveAll(data); err != nil {
			return err
		}
		return os.CopyFS(data, os.DirFS(dir))
	}
}

// launch starts the java process without waiting for it to serve.
func (s *Server) launch() error {
	args := append(append([]string{}, javaArgs...),
		"-cp", zookeeperJar+":"+slf4jSimpleJar, s.mainClass, s.cfgPath())
	cmd := exec.Command("java", args...)
	cmd.Dir = s.dir
	return s.proc.Start(cmd)
}

// waitReady polls srvr until it reports a Mode:, failing fast if the
// process exits.
func (s *Server) waitReady(deadline time.Time) error {
	return s.proc.WaitReady(func() bool { _, err := Mode(s.Addr); return err == nil }, deadline)
}

// fourLetters sends a four-letter word to the server at addr and returns
// its answer.
func fourLetters(addr, word string) ([]byte, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, word); err != nil {
		return nil, err
	}
	return io.ReadAll(c)
}

// Watched tells whether any session has a data or exists watch on path
// (four-letter word wchp, which lists no child watch), so that a test can
// wait until a daemon waits on a node.
func Watched(addr, path string) (bool, error) {
	out, err := fourLetters(addr, "wchp")
	if err != nil {
		return false, err
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if string(bytes.TrimSpace(line)) == path {
			return true, nil
		}
	}
	return false, nil
}

// Watches counts the watches the server at addr holds, of every session
// (four-letter word mntr, zk_watch_count). Unlike wchp, which lists data
// and exists watches only, it counts child watches too.
func Watches(addr string) (int, error) {
	out, err := fourLetters(addr, "mntr")
	if err != nil {
		return 0, err
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if n, ok := bytes.CutPrefix(line, []byte("zk_watch_count")); ok {
			return strconv.Atoi(strings.TrimSpace(string(n)))
		}
	}
	return 0, fmt.Errorf("zktest: no zk_watch_count in the mntr of %s: %q", addr, bytes.TrimSpace(out))
}

// Mode asks the server at addr (four-letter word srvr) for its mode:
// "standalone", "leader" or "follower". It fails while the server is not
// serving.
func Mode(addr string) (string, error) {
	out, err := fourLetters(addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if mode, ok := bytes.CutPrefix(line, []byte("Mode:")); ok {
			return strings.TrimSpace(string(mode)), nil
		}
	}
	return "", fmt.Errorf("zktest: %s not serving: %q", addr, bytes.TrimSpace(out))
}

// writeConfig writes s's zoo.cfg, plus data/myid for ensemble members
// (myid > 0). peers are the "server.N=host:peer:election" lines. Sessions
// may last 5 minutes: a test keeps daemons frozen in ZooKeeper for longer
// than the minute an event is sent again (cmd/ingestq's
// TestDaemonCutOffFromItsQuorumKeepsItsHeldMovesAcrossAKill).
func writeConfig(s *Server, clientPort int, peers []string, myid int) error {
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`tickTime=500
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
minSessionTimeout=400
maxSessionTimeout=300000
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr,wchp
`, s.dataDir(), clientPort)
	for _, p := range peers {
		cfg += p + "\n"
	}
	if myid > 0 {
		path := filepath.Join(s.dataDir(), "myid")
		if err := os.WriteFile(path, []byte(fmt.Sprintf("%d\n", myid)), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(s.cfgPath(), []byte(cfg), 0o644)
}

// freePorts returns n distinct free loopback ports (internal/freeport).
func freePorts(n int) ([]int, error) {
	ports, err := freeport.Ports(n)
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	return ports, nil
}
