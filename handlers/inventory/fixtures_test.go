package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
)

const (
	arkA    = "ark:/99999/fk4aaaaaaa"
	arkB    = "ark:/99999/fk4bbbbbbb"
	profile = "demo_content"
)

func digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// record returns a version of ark whose files depend on content.
func record(ark string, version int, content string, localIDs ...string) Record {
	return Record{
		ARK: ark, Profile: profile, LocalIDs: localIDs, Version: version,
		Created: time.Date(2025, 3, 1, 12, 0, version, 0, time.UTC),
		Files: []FileRow{
			{Name: "system/mrt-erc.txt", Size: 20, SHA256: digest("erc" + content)},
			{Name: "producer/a.txt", Size: int64(len(content)), SHA256: digest(content)},
		},
		Batch: "bid-1", Job: "jid-" + content,
		Who: "Someone", What: "Thing " + content, When: "2025", Where: ark,
	}
}

// at is a time with nanoseconds, which inventories keep to the microsecond.
func at(minute int) time.Time {
	return time.Date(2025, 3, 1, 12, minute, 0, 123_456_789, time.FixedZone("CET", 3600))
}

func replica(target string, minute int) Replica {
	return Replica{Target: target, URL: "s3://" + target + "/objects/a", Verified: at(minute)}
}

func event(typ string, minute int) Event {
	return Event{ID: uuid.NewString(), Type: typ, At: at(minute), Outcome: OutcomeSuccess,
		Agent: "ingestq v0.0.0-test on host1", Detail: typ + " detail"}
}

func openTemp(t *testing.T) (*Local, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inventory.db")
	l, err := OpenLocal(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func mustRecord(t *testing.T, inv Inventory, r Record) {
	t.Helper()
	if err := inv.Record(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func mustObject(t *testing.T, inv Inventory, ark string) ObjectDetail {
	t.Helper()
	d, err := inv.Object(context.Background(), ark)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustNormalize(t *testing.T, r Record) Record {
	t.Helper()
	n, err := normalize(r)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
