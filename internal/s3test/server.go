// Package s3test runs a real S3 server for tests: versitygw, an S3 gateway
// over a folder, built by scripts/install-versitygw.sh. Start gives each
// test its own server on a free loopback port with random root
// credentials and one bucket; Stop, Restart, Freeze and Thaw serve fault
// tests; Proxy sits between a client and the server to corrupt bytes in
// flight, and Gate holds a chosen PUT until the test releases it.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ingestq/ingestq/internal/childproc"
	"github.com/ingestq/ingestq/internal/freeport"
)

// Version is the versitygw release the install script builds.
const Version = "v1.8.0"

const (
	readyTimeout = 30 * time.Second
	startTries   = 3 // attempts with a fresh port when the port was taken
)

// Binary is where scripts/install-versitygw.sh puts versitygw:
// $XDG_CACHE_HOME/ingestq-tools/versitygw-<Version>/versitygw, with
// XDG_CACHE_HOME defaulting to ~/.cache.
func Binary() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "ingestq-tools", "versitygw-"+Version, "versitygw")
}

// Installed reports nil when versitygw is at Binary, else an error naming
// the command that installs it.
func Installed() error {
	if _, err := os.Stat(Binary()); err != nil {
		return fmt.Errorf("s3test: versitygw is not installed (%s missing); install it with:\n\t"+
			"./scripts/install-versitygw.sh   (or: make deps)", Binary())
	}
	return nil
}

// Server is one versitygw process serving the folders under its data
// folder as buckets.
type Server struct {
	Addr      string // "127.0.0.1:port"; it survives Restart
	AccessKey string // the root account's keys
	SecretKey string
	Bucket    string // created by Start

	dir  string // holds data/ (the buckets) and versitygw.log
	proc *childproc.Proc
}

// Start starts a server in a temp folder of t, creates its Bucket, and has
// t.Cleanup stop it. A missing versitygw fails the test with the install
// command.
func Start(t testing.TB) *Server {
	t.Helper()
	if err := Installed(); err != nil {
		t.Fatal(err)
	}
	s, err := start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := s.makeBucket(); err != nil {
		t.Fatal(err)
	}
	return s
}

func start(dir string) (*Server, error) {
	s := &Server{AccessKey: randomHex(10), SecretKey: randomHex(20), Bucket: "test", dir: dir}
	if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
		return nil, err
	}
	var err error
	for range startTries {
		if s.Addr, err = freeAddr(); err != nil {
			return nil, err
		}
		s.proc = &childproc.Proc{Name: "s3test: versitygw at " + s.Addr, LogPath: s.LogPath(), PortTaken: "address already in use"}
		if err = s.Restart(); !errors.Is(err, childproc.ErrPortTaken) {
			return s, err
		}
	}
	return nil, err
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// LogPath is the file that collects the server's output.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "versitygw.log") }

// URL is the place URL of prefix in the server's bucket, for clients that
// reach the server at endpoint ("host:port": s.Addr, or a Proxy's Addr).
func (s *Server) URL(endpoint, prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&secure=false", s.Bucket, prefix, endpoint)
}

// SetEnv sets the AWS_* variables a client reads to the root credentials,
// for the rest of t (so t cannot be parallel).
func (s *Server) SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
}

// Client is a plain minio-go client of the server, for looking behind a
// client under test.
func (s *Server) Client() (*minio.Client, error) {
	return minio.New(s.Addr, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		BucketLookup: minio.BucketLookupPath,
	})
}

func (s *Server) makeBucket() error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := c.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("s3test: create bucket %s at %s: %w", s.Bucket, s.Addr, err)
	}
	return nil
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
// It is a no-op when the server is not running.
func (s *Server) Stop() error { return s.proc.Stop() }

// Freeze stops the server with SIGSTOP: connections stay open and nothing
// answers, as on a hung host. Thaw undoes it.
func (s *Server) Freeze() error { return s.proc.Freeze() }

// Thaw continues a frozen server.
func (s *Server) Thaw() error { return s.proc.Thaw() }

// Restart starts the server again on the same port and data after Stop,
// and waits until it answers.
func (s *Server) Restart() error {
	cmd := exec.Command(Binary(), "--port", s.Addr, "--quiet", "--keep-alive", "posix", s.dataDir())
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	if err := s.proc.Start(cmd); err != nil {
		return err
	}
	// Serving once an unsigned request gets an answer (403).
	client := &http.Client{Timeout: time.Second}
	ready := func() bool {
		resp, err := client.Get("http://" + s.Addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}
	if err := s.proc.WaitReady(ready, time.Now().Add(readyTimeout)); err != nil {
		_ = s.Stop()
		return err
	}
	return nil
}

func freeAddr() (string, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return "", fmt.Errorf("s3test: %w", err)
	}
	return addr, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
