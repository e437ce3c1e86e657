package mint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/reactor/queue"
	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

func newQueue(t *testing.T, conn *zk.Conn, root string) *queue.Queue {
	t.Helper()
	q, err := queue.New(conn, root)
	if err == nil {
		err = q.Init(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func mustMint(t *testing.T, m *Minter, jid, naan, shoulder string) string {
	t.Helper()
	a, err := m.Mint(context.Background(), jid, naan, shoulder)
	if err != nil {
		t.Fatalf("Mint(%s): %v", jid, err)
	}
	return a
}

func nodeData(t *testing.T, conn *zk.Conn, p string) string {
	t.Helper()
	data, _, err := conn.Get(p)
	if err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	return string(data)
}

func TestMintFormat(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	m := New(newQueue(t, conn, root))
	first := mustMint(t, m, "jid-1", "99999", "fk4")
	if first != "ark:/99999/fk40000017" { // check character worked out in check_test.go
		t.Errorf("first ARK = %s, want ark:/99999/fk40000017", first)
	}
	second := mustMint(t, m, "jid-2", "99999", "fk4")
	if want := ark("99999", "fk4", 2); second != want || !Valid(second) {
		t.Errorf("second ARK = %s, want %s", second, want)
	}
	if got := nodeData(t, conn, root+"/ingestq/minter/99999-fk4"); got != "2" {
		t.Errorf("counter = %q, want \"2\"", got)
	}
	if got := nodeData(t, conn, root+"/ingestq/minted/jid-1"); got != first {
		t.Errorf("record = %q, want %s", got, first)
	}
	// Another shoulder has its own counter.
	if got := mustMint(t, m, "jid-3", "13030", "m5"); got != ark("13030", "m5", 1) {
		t.Errorf("other shoulder: %s, want %s", got, ark("13030", "m5", 1))
	}
}

func TestMintIdempotent(t *testing.T) {
	root := zktest.Root(t)
	conn := zktest.Connect(t)
	a := mustMint(t, New(newQueue(t, conn, root)), "job", "99999", "fk4")
	// Another host (session) asking again, as after a crash, gets the same ARK.
	again := mustMint(t, New(newQueue(t, zktest.Connect(t), root)), "job", "99999", "fk4")
	if again != a {
		t.Errorf("second Mint = %s, first = %s", again, a)
	}
	if got := nodeData(t, conn, root+"/ingestq/minter/99999-fk4"); got != "1" {
		t.Errorf("counter = %q after a repeated Mint, want \"1\"", got)
	}
	_, err := New(newQueue(t, conn, root)).Mint(context.Background(), "job", "13030", "m5")
	if err == nil || !strings.Contains(err.Error(), a) {
		t.Errorf("Mint under another shoulder: error %v does not show the existing %s", err, a)
	}
}

// TestMintSameJobConcurrently races minters of one jid: one wins, the others
// return its ARK, and only one number is used.
func TestMintSameJobConcurrently(t *testing.T) {
	root := zktest.Root(t)
	arks := make([]string, 8)
	var wg sync.WaitGroup
	for i := range arks {
		m := New(newQueue(t, zktest.Connect(t), root))
		wg.Go(func() {
			a, err := m.Mint(context.Background(), "same-job", "99999", "fk4")
			if err != nil {
				t.Error(err)
			}
			arks[i] = a
		})
	}
	wg.Wait()
	for _, a := range arks {
		if a != ark("99999", "fk4", 1) {
			t.Errorf("got %v, want all %s", arks, ark("99999", "fk4", 1))
			break
		}
	}
}

// TestMintUniqueAcrossHosts: 4 Minters on separate sessions, 8 goroutines
// each, 50 mints per goroutine. Every ARK is distinct and valid, and the
// numbers used are exactly 1..1600: none burned, none reused.
func TestMintUniqueAcrossHosts(t *testing.T) {
	const minters, goroutines, mints = 4, 8, 50
	root := zktest.Root(t)
	var mu sync.Mutex
	seen := map[string]string{} // ARK → jid
	var wg sync.WaitGroup
	for h := range minters {
		m := New(newQueue(t, zktest.Connect(t), root))
		for g := range goroutines {
			wg.Go(func() {
				for i := range mints {
					jid := fmt.Sprintf("h%d-g%d-%d", h, g, i)
					a, err := m.Mint(context.Background(), jid, "99999", "fk4")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if other, dup := seen[a]; dup {
						t.Errorf("%s minted for both %s and %s", a, other, jid)
					}
					seen[a] = jid
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	const total = minters * goroutines * mints
	if len(seen) != total {
		t.Fatalf("%d distinct ARKs, want %d", len(seen), total)
	}
	for n := uint64(1); n <= total; n++ {
		if _, ok := seen[ark("99999", "fk4", n)]; !ok {
			t.Errorf("number %d was not minted", n)
		}
	}
	for a := range seen {
		if !Valid(a) {
			t.Errorf("Valid(%s) = false", a)
		}
	}
}

func TestForget(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	m := New(newQueue(t, conn, root))
	first := mustMint(t, m, "done", "99999", "fk4")
	if err := m.Forget(t.Context(), "done"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := conn.Exists(root + "/ingestq/minted/done"); ok || err != nil {
		t.Errorf("record still there after Forget (%v)", err)
	}
	if err := m.Forget(t.Context(), "done"); err != nil {
		t.Errorf("second Forget: %v", err)
	}
	// The number stays used: minting the jid again gives a new ARK.
	if again := mustMint(t, m, "done", "99999", "fk4"); again == first {
		t.Errorf("after Forget the same ARK %s was minted again", first)
	}
	if err := m.Forget(t.Context(), "a/b"); err == nil {
		t.Error("Forget(a/b): no error")
	}
}

func TestMintRejects(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	m := New(newQueue(t, conn, root))
	tests := []struct{ jid, naan, shoulder, want string }{
		{"j", "9999x", "fk4", `naan "9999x"`},
		{"j", "", "fk4", `naan ""`},
		{"j", "99999", "fka4", `shoulder "fka4"`},
		{"j", "99999", "", `shoulder ""`},
		{"a/b", "99999", "fk4", `job id "a/b"`},
		{"", "99999", "fk4", `job id ""`},
		{"..", "99999", "fk4", `job id ".."`},
	}
	for _, tt := range tests {
		a, err := m.Mint(context.Background(), tt.jid, tt.naan, tt.shoulder)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Mint(%q, %q, %q) = %q, %v; want an error with %s", tt.jid, tt.naan, tt.shoulder, a, err, tt.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Mint(ctx, "j", "99999", "fk4"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestMintCorruptNodes(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	m := New(newQueue(t, conn, root))
	mustMint(t, m, "ok", "99999", "fk4")
	counter := "/ingestq/minter/99999-fk4" // errors name paths under the root
	if _, err := conn.Set(root+counter, []byte("twelve"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Mint(context.Background(), "next", "99999", "fk4"); err == nil || !strings.Contains(err.Error(), counter) {
		t.Errorf("corrupt counter: error %v does not name %s", err, counter)
	}
	if _, err := conn.Create(root+"/ingestq/minted/bad", []byte("ark:/99999/fk4000001x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Mint(context.Background(), "bad", "99999", "fk4"); err == nil || !strings.Contains(err.Error(), "record of bad") {
		t.Errorf("corrupt record: error %v does not name the job's record", err)
	}
}

// Sweep forgets the records of jobs that are gone, keeps the others, and
// keeps (and reports) those it cannot judge.
func TestSweep(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	m := New(newQueue(t, conn, root))
	if removed, err := m.Sweep(t.Context(), func(string) (bool, error) { return true, nil }); err != nil || len(removed) != 0 {
		t.Fatalf("sweep of nothing: %v %v", removed, err)
	}
	for _, jid := range []string{"deleted", "running", "unreadable"} {
		mustMint(t, m, jid, "99999", "fk4")
	}
	removed, err := m.Sweep(t.Context(), func(jid string) (bool, error) {
		switch jid {
		case "deleted":
			return true, nil
		case "unreadable":
			return false, errors.New("zk down")
		}
		return false, nil
	})
	if len(removed) != 1 || removed[0] != "deleted" || err == nil || !strings.Contains(err.Error(), "zk down") {
		t.Fatalf("removed %v, err %v; want [deleted] and the unreadable job's error", removed, err)
	}
	left, _, err := conn.Children(root + "/ingestq/minted")
	slices.Sort(left)
	if err != nil || !slices.Equal(left, []string{"running", "unreadable"}) {
		t.Errorf("records left %v (%v), want running and unreadable", left, err)
	}
}
