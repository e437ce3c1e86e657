package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A cluster secret file that cannot be read, is empty, holds several lines
// or a short secret is refused at once, naming the file and what to
// write; so is one given without --nats-cluster. No error shows the secret.
func TestServeClusterSecretFileRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	file := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := file("good", "0123456789abcdef0123456789abcdef\n")
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		what, file, secret string
		cluster            bool
		want               []string
	}{
		{"missing", missing, "", true, []string{"--nats-cluster-secret-file: open " + missing, "no such file"}},
		{"empty", file("empty", "\n \n"), "", true, []string{"--nats-cluster-secret-file " + dir + "/empty is empty", "openssl rand -hex 32"}},
		{"two lines", file("two", "first-line-of-a-secret\nsecond-line-of-it\n"), "first-line-of-a-secret", true,
			[]string{dir + "/two holds more than one line"}},
		{"short", file("short", "s3cret-short\n"), "s3cret-short", true, []string{dir + "/short: the secret has 12 characters, want 16 or more"}},
		{"no --nats-cluster", good, "0123456789abcdef", false, []string{good + ": it authenticates the routes of --nats-cluster, which is not given"}},
	} {
		args := []string{"--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "serve", "--data-dir", t.TempDir(), "--pipeline", "passthrough",
			"--nats-listen", "off", "--http", "off", "--nats-cluster-secret-file", c.file}
		if c.cluster {
			args = append(args, "--nats-cluster", closedAddr(t))
		}
		stderr, code := serveRefused(t, nil, args...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want...)
		if c.secret != "" && strings.Contains(stderr, c.secret) {
			t.Errorf("%s: the error %q shows the secret", c.what, stderr)
		}
	}
}

// A cluster listener other hosts can reach (0.0.0.0) without a secret is
// warned of once; with one, it is not, and a secret's file open to group
// or others is, naming its mode (as the API's token file is).
func TestServeClusterSecretWarnings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const unauthenticated = "--nats-cluster: the routes are not authenticated"
	_, port, _ := net.SplitHostPort(closedAddr(t))
	open := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--host", "open", "--nats-cluster", "0.0.0.0:"+port)
	if lines := open.log.Lines(unauthenticated); len(lines) != 1 || !strings.Contains(lines[0], "WRN") ||
		!strings.Contains(lines[0], "--nats-cluster-secret-file") {
		t.Errorf("serve --nats-cluster 0.0.0.0:%s without a secret logged %q; want one warning naming --nats-cluster-secret-file", port, lines)
	}
	open.stop()

	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secret, 0o640); err != nil { // as the umask may not give it
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(closedAddr(t))
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--host", "closed", "--nats-cluster", "0.0.0.0:"+port,
		"--nats-cluster-secret-file", secret)
	line := d.log.WaitFor(t, "--nats-cluster-secret-file: the secret's file is open to group or others")
	if !strings.Contains(line, "mode=0640") || !strings.Contains(line, secret) || !strings.Contains(line, "WRN") {
		t.Errorf("the warning %q does not name the file, its mode 0640, as a warning", line)
	}
	if lines := d.log.Lines(unauthenticated); len(lines) != 0 {
		t.Errorf("serve with a cluster secret logged %q", lines)
	}
}
