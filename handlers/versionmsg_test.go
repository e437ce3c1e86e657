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
