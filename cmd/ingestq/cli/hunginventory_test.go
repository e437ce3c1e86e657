package cli_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/childproc"
	"github.com/ingestq/ingestq/internal/freeport"
)

// inventoryServiceEnv makes this test binary the project's inventory
// service: "ADDR DB".
const inventoryServiceEnv = "INGESTQ_TEST_INVENTORY_SERVICE"

func serveInventory(spec string) {
	var addr, db string
	fmt.Sscan(spec, &addr, &db)
	inv, err := inventory.OpenLocal(db)
	if err == nil {
		err = http.ListenAndServe(addr, inventory.NewServer(inv, nil))
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// ingestq object against an inventory service, or an API, that hangs (the
// service's process frozen with SIGSTOP) fails within its --fetch-timeout
// per try, saying so, instead of waiting for good; thawed, it answers.
func TestObjectFromAHungInventoryFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "inventory.db")
	const ark = "ark:/99999/fk4hung"
	recordObject(t, db, ark, "prof", "local")
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	p := &childproc.Proc{Name: "inventory service " + addr, LogPath: filepath.Join(dir, "service.log")}
	t.Cleanup(func() { _ = p.Kill() })
	url := "http://" + addr
	if err := p.StartSelf(inventoryServiceEnv+"="+addr+" "+db, url+"/objects/none"); err != nil {
		t.Fatal(err)
	}
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_ = p.Thaw()
		}
	})

	// Each command must end: before, it waited for good.
	object := func(args ...string) (string, string, int) {
		type result struct {
			stdout, stderr string
			code           int
		}
		done := make(chan result, 1)
		go func() {
			stdout, stderr, code := e.run(append([]string{"object", ark, "--fetch-timeout", "300ms"}, args...)...)
			done <- result{stdout, stderr, code}
		}()
		select {
		case r := <-done:
			return r.stdout, r.stderr, r.code
		case <-time.After(time.Minute):
			t.Fatalf("ingestq object %v has not ended in a minute", args)
		}
		return "", "", 0
	}
	_, stderr, code := object("--inventory", url)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, url, "stalled: no byte moved for 300ms")
	_, stderr, code = object("--api", url)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "the daemon's API does not answer (--api "+url, "stalled: no byte moved for 300ms")

	if err := p.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed = true
	stdout, _, code := object("--inventory", url)
	wantCode(t, code, 0)
	if !strings.Contains(stdout, ark) {
		t.Fatalf("thawed, object printed %q: want the object %s", stdout, ark)
	}
}
