package ocfl

import (
	"context"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage"
)

// A deposit's Put run again after its version landed and another deposit
// of the object made a newer one (the first job's host died before it
// recorded its version; the job taken over stores again) finds its own
// version by its message and content. Before, it made a third version that
// put the older deposit's content back on top, and left its first version
// to no record.
func TestPutAgainFindsItsVersionUnderANewerHead(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	describing := []string{"system/premis.xml"}
	first := storage.Object{ARK: testARK, Message: "ingestq: batch bid1 job jid1", Describing: describing,
		Files: workFiles(t, map[string]string{"producer/a.txt": "one\n", "system/premis.xml": "<jid1 on host1/>"})}
	later := storage.Object{ARK: testARK, Message: "ingestq: batch bid2 job jid2", Describing: describing,
		Files: workFiles(t, map[string]string{"producer/a.txt": "two\n", "system/premis.xml": "<jid2/>"})}
	for i, obj := range []storage.Object{first, later} {
		if v, err := s.Put(ctx, obj); err != nil || v.Number != i+1 {
			t.Fatalf("put %d = version %d, %v", i+1, v.Number, err)
		}
	}

	// Taken over on another host: the describing file is written anew.
	again := first
	again.Files = workFiles(t, map[string]string{"producer/a.txt": "one\n", "system/premis.xml": "<jid1 on host2/>"})
	v, err := s.Put(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if v.Number != 1 || v.Changed {
		t.Fatalf("put again = version %d changed %v; want version 1 unchanged", v.Number, v.Changed)
	}
	sameFiles(t, v.Files, first.Files) // as stored, with sizes
	if latest, err := s.Latest(ctx, testARK); err != nil || latest.Number != 2 {
		t.Fatalf("latest = version %d, %v; want the later deposit's 2", latest.Number, err)
	}

	// Another deposit of the first content is a new version.
	revert := first
	revert.Message = "ingestq: batch bid3 job jid3"
	if v, err := s.Put(ctx, revert); err != nil || v.Number != 3 || !v.Changed {
		t.Fatalf("a third deposit = version %d changed %v, %v; want a new version 3", v.Number, v.Changed, err)
	}
}
