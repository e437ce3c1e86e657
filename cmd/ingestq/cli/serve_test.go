package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The config file fills in what neither a flag nor an environment variable
// set, with ${VAR} expanded, and names what it does not know.
func TestApplyConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ingestq.yml")
	err := os.WriteFile(file, []byte("data-dir: ${BASE}/data\nworkers: 9\nzk: zk1:2181\ngrace: 5s\n"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BASE": "/srv/ingestq", EnvZK: "zk-from-env:2181"}
	getenv := func(k string) string { return env[k] }
	fl := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	dataDir, zk := fl.String("data-dir", "ingestq-data", ""), fl.String("zk", "zk-from-env:2181", "")
	workers, grace := fl.Int("workers", 4, ""), fl.Duration("grace", 0, "")
	if err := fl.Parse([]string{"--workers", "2"}); err != nil {
		t.Fatal(err)
	}
	if err := applyConfig(fl, file, getenv); err != nil {
		t.Fatal(err)
	}
	if *dataDir != "/srv/ingestq/data" || *workers != 2 || *zk != "zk-from-env:2181" || grace.String() != "5s" {
		t.Fatalf("data-dir %q workers %d zk %q grace %v: want the file's data-dir and grace, the flag's workers, the env's zk",
			*dataDir, *workers, *zk, *grace)
	}
	if err := os.WriteFile(file, []byte("wokers: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = applyConfig(fl, file, getenv)
	if err == nil || !strings.Contains(err.Error(), `unknown setting "wokers"`) {
		t.Fatalf("a misspelt setting: %v", err)
	}
}

// The daemon's state goes to the XDG state folder, never into the folder
// serve happens to start in (a repository, when following the README).
func TestDefaultDataDir(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/ann"}, "/x/state/ingestq"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/ann"}, "/home/ann/.local/state/ingestq"},
		{map[string]string{"HOME": "/home/ann"}, "/home/ann/.local/state/ingestq"},
		{map[string]string{}, "ingestq-data"},
	} {
		if got := defaultDataDir(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("env %v: %q, want %q", c.env, got, c.want)
		}
	}
}
