package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// recordObject records a one-version object in the bbolt inventory at db.
func recordObject(t *testing.T, db, ark, prof, localID string) {
	t.Helper()
	inv, err := inventory.OpenLocal(db)
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	err = inv.Record(context.Background(), inventory.Record{ARK: ark, Profile: prof, LocalIDs: []string{localID}, Version: 1,
		Created: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Files:   []inventory.FileRow{{Name: "producer/a.txt", Size: 5, SHA256: strings.Repeat("ab", 32)}},
		Batch:   "bid0000000001", Job: "jid0000000001", What: "A thing of " + prof})
	if err != nil {
		t.Fatal(err)
	}
}

// ingestq object reads the inventory the user named, names it in its
// output and in a not-found error, prefers --api to a default data folder's
// inventory (which may be another queue's), and changes nothing in a file
// it reads: not a byte, not its modification time.
func TestObjectReadsTheInventoryGiven(t *testing.T) {
	t.Parallel()
	state := t.TempDir() // XDG_STATE_HOME: the default --data-dir is state/ingestq
	other := filepath.Join(state, "ingestq", "inventory.db")
	if err := os.MkdirAll(filepath.Dir(other), 0o750); err != nil {
		t.Fatal(err)
	}
	const ark = "ark:/99999/fk4same"
	recordObject(t, other, ark, "other-queue", "theirs")
	data := t.TempDir()
	mine := filepath.Join(data, "inventory.db")
	recordObject(t, mine, ark, "my-queue", "mine")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, db := range []string{other, mine} {
		if err := os.Chtimes(db, old, old); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadFile(mine)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"XDG_STATE_HOME": state}

	// --api given: the API is asked, not the default folder's inventory.
	api := "http://" + closedAddr(t) + "/api/v1"
	out, stderr, code := runEnv(t, env, slices.Concat(nowhere, []string{"object", ark, "--api", api})...)
	wantCode(t, code, 1)
	if strings.Contains(out, "other-queue") {
		t.Errorf("object --api read the default data folder's inventory:\n%s", out)
	}
	wantErrLine(t, stderr, "--api is given, and the daemon's API does not answer", api)
	// Nothing given: the default API too; the default folder's inventory
	// is named as read only when asked for.
	_, stderr, code = runEnv(t, map[string]string{"XDG_STATE_HOME": state, "INGESTQ_API": api},
		slices.Concat(nowhere, []string{"object", ark})...)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, api)

	// --data-dir given: its inventory, named in the output and the JSON.
	out, _, code = runEnv(t, env, slices.Concat(nowhere, []string{"object", ark, "--data-dir", data})...)
	wantCode(t, code, 0)
	if !strings.HasPrefix(out, "inventory: "+mine+"\n") || !strings.Contains(out, "my-queue") {
		t.Errorf("object --data-dir %s:\n%s\nwant it to start with the inventory read, and show my-queue's object", data, out)
	}
	out, _, code = runEnv(t, env, slices.Concat(nowhere, []string{"object", ark, "--data-dir", data, "-o", "json"})...)
	wantCode(t, code, 0)
	var d struct {
		Inventory string
		Object    struct{ Profile string }
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Inventory != mine || d.Object.Profile != "my-queue" {
		t.Errorf("object -o json: %+v (%v), want inventory %s and my-queue's object:\n%s", d, err, mine, out)
	}
	_, stderr, code = runEnv(t, env, slices.Concat(nowhere, []string{"object", "ark:/99999/fk4none", "--data-dir", data})...)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "no object ark:/99999/fk4none in the inventory "+mine)
	_, stderr, code = runEnv(t, env, slices.Concat(nowhere, []string{"object", "--profile", "my-queue", "nothing", "--inventory", mine})...)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "no object nothing in the inventory "+mine)

	// Reading wrote nothing.
	after, err := os.ReadFile(mine)
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{other, mine} {
		fi, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(old) {
			t.Errorf("%s: modified at %v by reads, want its time %v untouched", db, fi.ModTime(), old)
		}
	}
	if !bytes.Equal(before, after) {
		t.Errorf("%s changed under reads", mine)
	}
}

// access request's estimate names the inventory it read when the object
// is not there.
func TestAccessRequestNamesTheInventoryRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	data := t.TempDir()
	db := filepath.Join(data, "inventory.db")
	recordObject(t, db, "ark:/99999/fk4here", "demo", "here")
	_, stderr, code := e.run("access", "request", "ark:/99999/fk4elsewhere", "--data-dir", data)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "object ark:/99999/fk4elsewhere is not in the inventory", "the inventory read: "+db)
}

// A daemon's API that does not answer where --api points names the APIs
// the daemons working this queue serve (ingestq hosts has them), and one
// that refuses the CLI's token says why, and where the CLI takes it from.
func TestObjectNamesTheQueuesAPIs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	const token = "read-token-0123456789abcdef"
	if err := os.WriteFile(tokens, []byte("read "+token+" reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := serve(t, zktest.Shared(t).Addr, e.root, "--pipeline", "passthrough", "--api-tokens", tokens)
	const ark = "ark:/99999/fk4none"

	// The default --api (nothing there): the daemon's own API is named.
	closed := "http://" + closedAddr(t) + "/api/v1"
	_, stderr, code := runEnv(t, map[string]string{"INGESTQ_API": closed}, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root, "object", ark)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, closed, "does not answer", "--api "+d.url+"/api/v1")
	_, stderr, code = e.run("access", "request", ark, "--api", closed)
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "--api "+d.url+"/api/v1")

	// Its API without a token, then with the token: each refusal says why
	// (a pass-through daemon has no inventory), not only its status.
	_, stderr, code = e.run("object", ark, "--api", d.url+"/api/v1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "401", "needs a bearer token with the read role", "INGESTQ_API_TOKEN, which is not set")
	_, stderr, code = runEnv(t, map[string]string{"INGESTQ_API_TOKEN": token}, "--zk", zktest.Shared(t).Addr, "--zk-root", e.root,
		"object", ark, "--api", d.url+"/api/v1")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "503", "this daemon has no inventory")
	if strings.Contains(stderr, "TOKEN") {
		t.Errorf("a refusal that is not the token's names the token: %s", stderr)
	}
}

// --api naming a server that is not the API (the daemon's address without
// /api/v1) answers 404 without a problem document: object and audit say to
// check --api, where object said the inventory lacked the object and audit
// that the daemon was older than the CLI.
func TestAPIThatIsNotTheAPI(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler()) // a server without the API's routes
	t.Cleanup(srv.Close)
	for _, args := range [][]string{{"object", "ark:/99999/fk40000017"}, {"audit"}} {
		_, stderr, code := runEnv(t, nil, slices.Concat([]string{"--api", srv.URL}, args)...)
		wantCode(t, code, 1)
		if !strings.Contains(stderr, "not from ingestq's API") || !strings.Contains(stderr, "/api/v1") ||
			strings.Contains(stderr, "no object") || strings.Contains(stderr, "older than this ingestq") {
			t.Errorf("ingestq %s --api %s: %q; want it to say the address is not the API's", args[0], srv.URL, stderr)
		}
	}
}
