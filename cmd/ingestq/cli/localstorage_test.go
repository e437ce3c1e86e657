package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A daemon on a shared inventory (PostgreSQL) with no --storage stores the
// demo profile's objects in its own data folder: it says so at start,
// naming the folder and the inventory without its password, and what to
// do. A walk-through's three hosts each kept their own objects, recorded
// in one inventory, and nothing said so. Given --storage, it says nothing.
func TestServeWarnsOfLocalStorageBesideASharedInventory(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	inv := strings.Replace(pgtest.NewDatabase(t, pg), "postgres@", "postgres:hunter2-secret@", 1)
	const warning = "objects go to this host's data folder (no --storage, INGESTQ_STORAGE), while the inventory is shared"
	zk := zktest.Shared(t).Addr

	d := serve(t, zk, zktest.Root(t), "--inventory", inv)
	line := d.log.WaitFor(t, warning)
	if !strings.Contains(line, "every host of a cluster needs the same --storage") || !strings.Contains(line, "profiles=[demo]") ||
		!strings.Contains(line, "/ocfl") || strings.Contains(line, "hunter2-secret") {
		t.Errorf("the warning %q: want what to do, the profile, the folder, and the inventory without its password", line)
	}
	wantCode(t, d.stop(), 0)

	d = serve(t, zk, zktest.Root(t), "--inventory", inv, "--storage", t.TempDir())
	wantCode(t, d.stop(), 0)
	if strings.Contains(d.log.String(), warning) {
		t.Errorf("a daemon given --storage warned: %s", d.log.String())
	}
}

// A profile naming its own inventory (PostgreSQL, shared) but no storage,
// on a daemon whose inventory is its own file, stores here beside a
// shared inventory too: the warning names that profile alone and that
// inventory, without its password. It looked at the daemon's inventory
// only and said nothing.
func TestServeWarnsOfLocalStorageBesideAProfilesInventory(t *testing.T) {
	t.Parallel()
	inv := strings.Replace(pgtest.NewDatabase(t, pgtest.Start(t)), "postgres@", "postgres:hunter2-secret@", 1)
	dir := t.TempDir()
	for name, text := range map[string]string{"shared.yml": "name: shared\nnaan: \"99999\"\nshoulder: fk4\ninventory: " + inv + "\n",
		"plain.yml": "name: plain\nnaan: \"99999\"\nshoulder: fk5\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := serve(t, zktest.Shared(t).Addr, zktest.Root(t), "--profiles", dir)
	d.log.WaitFor(t, "ingestq: serving") // said after the warning
	line := "(none)"
	for l := range strings.Lines(d.log.String()) {
		if strings.Contains(l, "objects go to this host's data folder") {
			line = l
		}
	}
	if !strings.Contains(line, "profiles=[shared]") || !strings.Contains(line, "postgres:xxxxx@") || strings.Contains(line, "hunter2-secret") {
		t.Errorf("the warning %q: want profile shared alone, and its inventory without its password", line)
	}
	wantCode(t, d.stop(), 0)
}
