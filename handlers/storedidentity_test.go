package handlers_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The version a job stores names the job and its creation time as any host
// reads them (LoadJob's Created), also when the job came to Storing by
// hand-offs within one daemon and was never read: a host that takes the
// job over and stores it again finds its own version by that message
// (decision 239), where the handed-on view had no creation time.
func TestVersionMessageNamesTheJobAsAnyHostReadsIt(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	j := r.deposit("/obj.checkm", object{"a.txt": []byte("alpha\n")})
	r.checkStored(j, object{"a.txt": []byte("alpha\n")})
	invs, err := filepath.Glob(filepath.Join(r.data, "ocfl", "*", "*", "*", "*", "v1", "inventory.json"))
	if err != nil || len(invs) != 1 {
		t.Fatalf("the version's inventory: %v, %v; want one", invs, err)
	}
	data, err := os.ReadFile(invs[0])
	if err != nil {
		t.Fatal(err)
	}
	var inv struct {
		Versions map[string]struct{ Message string } `json:"versions"`
	}
	if err := json.Unmarshal(data, &inv); err != nil {
		t.Fatal(err)
	}
	msg := inv.Versions["v1"].Message
	if j.Created.IsZero() || !strings.Contains(msg, "job "+j.ID+" ") || !strings.Contains(msg, j.Created.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("version message %q; want it to name job %s and its creation, %s", msg, j.ID, j.Created.UTC().Format(time.RFC3339Nano))
	}
}

// A queue made anew over kept storage and inventory (its ZooKeeper data
// thrown away) mints from its counters' start again: the ARK minted then
// already names a stored object, and is passed over, where the new deposit
// became that object's second version (decision 255).
func TestMintPassesOverARKsAlreadyStored(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	first := r.deposit("/first.checkm", object{"poem.txt": []byte("I met a traveller\n")})
	old := r.checkStored(first, object{"poem.txt": []byte("I met a traveller\n")})
	// The new queue's minter: no counter, no records.
	for _, dir := range []string{"/ingestq/minter", "/ingestq/minted"} {
		kids, _, err := r.qs.Conn.Children(r.q.Path(dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			if err := r.qs.Conn.Delete(r.q.Path(dir+"/"+k), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	second := r.deposit("/second.checkm", object{"other.txt": []byte("an unrelated deposit\n")})
	ark := r.checkStored(second, object{"other.txt": []byte("an unrelated deposit\n")})
	if ark == old {
		t.Fatalf("the new deposit was stored under %s, the ARK of the object already stored", old)
	}
	v, err := r.p.Primary().Latest(t.Context(), old)
	if err != nil || v.Number != 1 {
		t.Fatalf("the object already stored, %s: version %d, %v; want still version 1", old, v.Number, err)
	}
}
