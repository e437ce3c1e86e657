package audit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.WithShared(m)) }

const profile = "demo"

// bench is an inventory and the storage targets of profile demo, a
// primary and a replica (OCFL roots), with the audit over them.
type bench struct {
	t       testing.TB
	inv     inventory.Handle
	targets []string // URLs, the primary first
	stores  []*ocfl.Store
	places  []place.Place
	a       *audit.Auditor
}

// newBench opens the inventory at invURL ("" for a bbolt file of the
// test's) and the OCFL roots at targets.
func newBench(t testing.TB, invURL string, targets ...string) *bench {
	t.Helper()
	inv, err := inventory.Open(t.Context(), invURL, filepath.Join(t.TempDir(), "inventory.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.Close() })
	b := &bench{t: t, inv: inv, targets: targets}
	for _, url := range targets {
		pl, err := place.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		st, err := ocfl.New(t.Context(), pl)
		if err != nil {
			t.Fatal(err)
		}
		b.places, b.stores = append(b.places, pl), append(b.stores, st)
	}
	b.a = &audit.Auditor{Inventory: inv, Targets: func(_ context.Context, name string) ([]audit.Target, error) {
		if name != profile {
			return nil, fmt.Errorf("no profile %q", name)
		}
		var out []audit.Target
		for i, url := range b.targets {
			out = append(out, audit.Target{Name: url, URL: url, Store: b.stores[i]})
		}
		return out, nil
	}}
	return b
}

// object is one version's files: name → content.
type object map[string]string

// put stores obj as the next version of ark at the targets given (by
// index), with the real OCFL store, and returns its files.
func (b *bench) put(ark string, obj object, at ...int) []storage.File {
	b.t.Helper()
	dir := b.t.TempDir()
	var files []storage.File
	for name, data := range obj {
		path := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			b.t.Fatal(err)
		}
		files = append(files, storage.File{Name: name, Path: path, Size: int64(len(data)), SHA256: digest(data)})
	}
	for _, i := range at {
		if _, err := b.stores[i].Put(b.t.Context(), storage.Object{ARK: ark, Files: files, Message: "ingestq: job jid-" + ark}); err != nil {
			b.t.Fatal(err)
		}
	}
	return files
}

// record records version n of ark, in profile prof, holding files.
func (b *bench) record(ark, prof string, n int, files []storage.File) {
	b.t.Helper()
	b.recordIn(b.inv, ark, prof, n, files)
}

// recordIn records version n of ark into inv.
func (b *bench) recordIn(inv inventory.Inventory, ark, prof string, n int, files []storage.File) {
	b.t.Helper()
	r := inventory.Record{ARK: ark, Profile: prof, Version: n, Created: time.Date(2026, 11, 1, 12, 0, n, 0, time.UTC),
		Batch: "bid-1", Job: "jid-1", Who: "Someone", What: "Thing", When: "2026", Where: ark}
	for _, f := range files {
		r.Files = append(r.Files, inventory.FileRow{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
	}
	slices.SortFunc(r.Files, func(x, y inventory.FileRow) int { return strings.Compare(x.Name, y.Name) })
	if err := inv.Record(b.t.Context(), r); err != nil {
		b.t.Fatal(err)
	}
}

// deposit stores the next version n of ark at every target and records it.
func (b *bench) deposit(ark string, n int, obj object) {
	b.t.Helper()
	b.record(ark, profile, n, b.put(ark, obj, b.all()...))
}

// depositThree deposits three objects of one small file and returns their
// ARKs, in order.
func (b *bench) depositThree() []string {
	b.t.Helper()
	arks := []string{"ark:/99999/fk4a", "ark:/99999/fk4b", "ark:/99999/fk4c"}
	for _, ark := range arks {
		b.deposit(ark, 1, object{"a.txt": ark})
	}
	return arks
}

func (b *bench) all() []int {
	var all []int
	for i := range b.targets {
		all = append(all, i)
	}
	return all
}

// key is the key of file under ark's object root in a storage root.
func key(ark, file string) string { return ocfltest.ObjectRoot(ark) + "/" + file }

// write puts data at ark's file in target i, as damage or a restore would.
func (b *bench) write(i int, ark, file string, data []byte) {
	b.t.Helper()
	if err := b.places[i].Put(b.t.Context(), key(ark, file), bytes.NewReader(data), int64(len(data)), digest(string(data))); err != nil {
		b.t.Fatal(err)
	}
}

// backup is every key of ark's object in target i, with its bytes.
func (b *bench) backup(i int, ark string) map[string][]byte {
	b.t.Helper()
	pl, out := b.places[i], map[string][]byte{}
	keys, err := pl.List(b.t.Context(), key(ark, ""))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, k := range keys {
		rc, err := pl.Open(b.t.Context(), k)
		if err != nil {
			b.t.Fatal(err)
		}
		out[k], err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			b.t.Fatal(err)
		}
	}
	return out
}

// restore puts ark's object in target i back as backup holds it.
func (b *bench) restore(i int, ark string, backup map[string][]byte) {
	b.t.Helper()
	pl := b.places[i]
	keys, err := pl.List(b.t.Context(), key(ark, ""))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, k := range keys {
		if err := pl.Delete(b.t.Context(), k); err != nil {
			b.t.Fatal(err)
		}
	}
	for k, data := range backup {
		if err := pl.Put(b.t.Context(), k, bytes.NewReader(data), int64(len(data)), digest(string(data))); err != nil {
			b.t.Fatal(err)
		}
	}
}

func digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// run audits with opt and returns the findings and the summary.
func (b *bench) run(opt audit.Options) ([]audit.Finding, audit.Summary) {
	b.t.Helper()
	var found []audit.Finding
	sum, err := b.a.Run(b.t.Context(), opt, audit.Report{Finding: func(f audit.Finding) error {
		found = append(found, f)
		return nil
	}})
	if err != nil {
		b.t.Fatalf("audit %+v: %v", opt, err)
	}
	return found, sum
}

// want is a finding as the tests name it.
type want struct {
	kind    audit.Kind
	ark     string
	target  int // index; -1: none
	version int
	file    string
}

// The objects of the damaged inventory, in ARK order: the first's OCFL
// inventory is damaged in the primary, so every later one shows that the
// walk goes on past it.
const (
	arkCorrupt   = "ark:/99999/fk4a-corrupt"
	arkIntact    = "ark:/99999/fk4b-intact"
	arkOlder     = "ark:/99999/fk4c-older"
	arkBytes     = "ark:/99999/fk4d-bytes"
	arkDeleted   = "ark:/99999/fk4e-deleted"
	arkNoReplica = "ark:/99999/fk4f-noreplica"
	arkAhead     = "ark:/99999/fk4g-ahead"
	arkSize      = "ark:/99999/fk4h-size"
	arkProfile   = "ark:/99999/fk4i-profile"
	arkListing   = "ark:/99999/fk4j-listing"
)

// damage stores the objects and does each one's damage.
func (b *bench) damage() {
	b.t.Helper()
	for _, ark := range []string{arkCorrupt, arkIntact, arkBytes, arkDeleted, arkSize} {
		b.deposit(ark, 1, object{"a.txt": "alpha of " + ark, "sub/b.txt": "beta"})
	}
	b.write(0, arkCorrupt, "inventory.json", []byte(`{"id": "ark:/99999/fk4a-corrupt", "head": `))
	// Same size, other bytes: only reading them finds it.
	b.write(0, arkBytes, "v1/content/a.txt", []byte(strings.ToUpper("alpha of "+arkBytes)))
	if err := b.places[1].Delete(b.t.Context(), key(arkDeleted, "v1/content/a.txt")); err != nil {
		b.t.Fatal(err)
	}
	b.write(1, arkSize, "v1/content/sub/b.txt", []byte("beta, and more"))

	// Restored older: version 2 gone from the primary.
	b.deposit(arkOlder, 1, object{"a.txt": "one"})
	v1 := b.backup(0, arkOlder)
	b.deposit(arkOlder, 2, object{"a.txt": "two"})
	b.restore(0, arkOlder, v1)

	// Only in the primary.
	b.record(arkNoReplica, profile, 1, b.put(arkNoReplica, object{"a.txt": "lonely"}, 0))

	// Storage ahead: version 2 stored everywhere, not recorded.
	b.deposit(arkAhead, 1, object{"a.txt": "one"})
	b.put(arkAhead, object{"a.txt": "two"}, b.all()...)

	// The inventory and storage disagree on a version's list of files.
	stored := b.put(arkListing, object{"a.txt": "a", "extra.txt": "stored, not recorded"}, b.all()...)
	lost := b.put(arkListing, object{"lost.txt": "recorded, not stored"})
	recorded := slices.DeleteFunc(stored, func(f storage.File) bool { return f.Name == "extra.txt" })
	b.record(arkListing, profile, 1, append(recorded, lost...))
	// In the replica the file not recorded has lost its content too: still
	// a file the record lacks, not a recorded file missing.
	if err := b.places[1].Delete(b.t.Context(), key(arkListing, "v1/content/extra.txt")); err != nil {
		b.t.Fatal(err)
	}

	// A profile this daemon does not know.
	b.record(arkProfile, "gone", 1, b.put(arkProfile, object{"a.txt": "x"}))
}

// findings without fixity.
var found = []want{
	{audit.TargetFailed, arkCorrupt, 0, 0, ""},
	{audit.VersionsMissing, arkOlder, 0, 2, ""},
	{audit.FileMissing, arkDeleted, 1, 1, "a.txt"},
	{audit.ObjectMissing, arkNoReplica, 1, 0, ""},
	{audit.VersionsUnrecorded, arkAhead, 0, 2, ""},
	{audit.VersionsUnrecorded, arkAhead, 1, 2, ""},
	{audit.FileDiffers, arkSize, 1, 1, "sub/b.txt"},
	{audit.UnknownProfile, arkProfile, -1, 0, ""},
	{audit.FileExtra, arkListing, 0, 1, "extra.txt"},
	{audit.FileMissing, arkListing, 0, 1, "lost.txt"},
	{audit.FileExtra, arkListing, 1, 1, "extra.txt"},
	{audit.FileMissing, arkListing, 1, 1, "lost.txt"},
}

// and with fixity: the changed bytes too.
var foundWithFixity = slices.Insert(slices.Clone(found), 2, want{audit.FixityFailed, arkBytes, 0, 1, "a.txt"})

// auditDamaged audits the damaged objects without and with fixity: each
// damage is found where it is, the intact object and the intact copies
// give nothing, and the walk goes past the damaged OCFL inventory.
func auditDamaged(t *testing.T, b *bench) {
	b.damage()
	for _, c := range []struct {
		fixity bool
		want   []want
	}{{false, found}, {true, foundWithFixity}} {
		got, sum := b.run(audit.Options{Fixity: c.fixity})
		b.check(fmt.Sprintf("fixity %v", c.fixity), got, c.want)
		for _, f := range got {
			// The version's message names the job that stored it.
			if made := `"ingestq: job jid-` + arkAhead + `" (version 2)`; f.Kind == audit.VersionsUnrecorded && !strings.Contains(f.Message, made) {
				t.Errorf("%q does not say %s", f.Message, made)
			}
			// With no newer inventory to restore, the repair that records it.
			if repair := "`ingestq audit --repair " + arkAhead + "`"; f.Kind == audit.VersionsUnrecorded && !strings.Contains(f.Message, repair) {
				t.Errorf("%q does not say %s", f.Message, repair)
			}
			if f.Kind == audit.FileExtra && f.Target == b.targets[1] && !strings.Contains(f.Message, "its content gone") {
				t.Errorf("%q does not say the extra file's content is gone", f.Message)
			}
			// Only the size differs: the stored digest is its OCFL inventory's,
			// the recorded one, shown once (it showed both, equal, as a difference).
			if f.Kind == audit.FileDiffers && (!strings.Contains(f.Message, "is 14 bytes, and the inventory records 4 bytes") ||
				strings.Count(f.Message, "SHA-256") != 1) {
				t.Errorf("%q: want the sizes that differ, and the one digest once", f.Message)
			}
		}
		if sum.Objects != 10 || sum.Findings != len(c.want) || sum.Last != arkListing || sum.More {
			t.Errorf("fixity %v: summary %+v, want 10 objects, %d findings, last %s", c.fixity, sum, len(c.want), arkListing)
		}
		// Versions: 1 of each object but 2 of arkOlder; files: 2 of each of the
		// first five deposited and of arkListing, 1 of each other version.
		if sum.Versions != 11 || sum.Files != 17 {
			t.Errorf("fixity %v: %d versions and %d files counted, want 11 and 17", c.fixity, sum.Versions, sum.Files)
		}
		if read := sum.BytesRead > 0; read != c.fixity {
			t.Errorf("fixity %v: %d bytes read", c.fixity, sum.BytesRead)
		}
	}
}

// check compares findings with expected, in order, and checks that each
// message names the ARK and the target.
func (b *bench) check(what string, got []audit.Finding, expected []want) {
	b.t.Helper()
	var short []want
	for _, f := range got {
		i := slices.Index(b.targets, f.Target)
		if f.Target != "" && i < 0 {
			b.t.Errorf("%s: %s names target %q, not one of %q", what, f.Kind, f.Target, b.targets)
		}
		if f.Target == "" {
			i = -1
		}
		short = append(short, want{f.Kind, f.ARK, i, f.Version, f.File})
		if !strings.Contains(f.Message, f.ARK) || !strings.Contains(f.Message, f.Target) {
			b.t.Errorf("%s: message %q does not name %s and %q", what, f.Message, f.ARK, f.Target)
		}
	}
	if !slices.Equal(short, expected) {
		b.t.Errorf("%s: findings\n%s\nwant\n%+v", what, strings.Join(strs(got), "\n"), expected)
	}
}

func strs(fs []audit.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%+v", f))
	}
	return out
}

// localBench is a primary and a replica in local OCFL roots and the
// bbolt inventory; its test runs in parallel.
func localBench(t *testing.T) *bench {
	t.Parallel()
	return newBench(t, "", t.TempDir(), t.TempDir())
}

// cloudBench is the primary on S3 (versitygw), a replica in a local root
// and the inventory in PostgreSQL. Not parallel: the AWS_* variables are
// the process's.
func cloudBench(t *testing.T) *bench {
	srv := s3test.Start(t)
	srv.SetEnv(t)
	return newBench(t, pgtest.NewDatabase(t, nil), srv.URL(srv.Addr, "ocfl"), t.TempDir())
}

func TestAuditFindsEachDamage(t *testing.T)                { auditDamaged(t, localBench(t)) }
func TestAuditFindsEachDamageOnS3AndPostgres(t *testing.T) { auditDamaged(t, cloudBench(t)) }

// A part of the walk: Limit stops it and says there is more, After takes
// it up, ARKs chooses; an ARK the inventory lacks is a finding, counted
// as not recorded and not as an object audited.
func TestAuditPartOfTheWalk(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	arks := b.depositThree()
	if _, sum := b.run(audit.Options{Limit: 2}); sum.Objects != 2 || sum.Last != arks[1] || !sum.More {
		t.Errorf("limit 2: %+v, want 2 objects, last %s, more", sum, arks[1])
	}
	if _, sum := b.run(audit.Options{After: arks[1], Limit: 1}); sum.Objects != 1 || sum.Last != arks[2] || sum.More {
		t.Errorf("after %s, limit 1: %+v, want 1 object, last %s, no more", arks[1], sum, arks[2])
	}
	unknown := "ark:/99999/fk4zzz"
	got, sum := b.run(audit.Options{ARKs: []string{unknown, arks[2], arks[0], arks[2]}})
	b.check("ARKs", got, []want{{audit.NotRecorded, unknown, -1, 0, ""}})
	if sum.Objects != 2 || sum.NotRecorded != 1 || sum.Findings != 1 || sum.Last != unknown {
		t.Errorf("ARKs: %+v, want 2 objects, 1 not recorded (its finding), the unknown one last", sum)
	}
	for _, opt := range []audit.Options{{ARKs: arks, Limit: 1}, {Every: -time.Second}} {
		if _, err := b.a.Run(t.Context(), opt, audit.Report{}); !errors.Is(err, inventory.ErrInvalid) {
			t.Errorf("options %+v: %v, want ErrInvalid", opt, err)
		}
	}
}

// A walk asks for a profile's targets once: a target that cannot be
// opened is a finding of each of its objects, not opened again for each.
func TestAuditAsksForAProfilesTargetsOnce(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	arks := b.depositThree()
	var asked atomic.Int32
	b.a.Targets = func(context.Context, string) ([]audit.Target, error) {
		asked.Add(1)
		return []audit.Target{{Name: "broken", Err: errors.New("connection refused")}}, nil
	}
	b.targets = []string{"broken"}
	got, _ := b.run(audit.Options{})
	b.check("a broken target", got, []want{
		{audit.TargetFailed, arks[0], 0, 0, ""}, {audit.TargetFailed, arks[1], 0, 0, ""}, {audit.TargetFailed, arks[2], 0, 0, ""}})
	if n := asked.Load(); n != 1 {
		t.Errorf("the targets of the profile were asked for %d times in one walk of %d objects, want once", n, len(arks))
	}
}

// latestOnly is a target that is only a Store (as a storage service is):
// its Latest waits until the audit has reported its counts once.
type latestOnly struct {
	storage.Store
	reported <-chan struct{}
}

func (s latestOnly) Latest(ctx context.Context, ark string) (storage.Version, error) {
	select {
	case <-s.reported:
	case <-ctx.Done():
		return storage.Version{}, ctx.Err()
	}
	return s.Store.Latest(ctx, ark)
}

// A target that is only a Store is compared at its latest version, and the
// summary says what was not audited there; an object that takes long
// still has the counts reported meanwhile. A target that could not be
// opened is a finding of each object, its password not shown.
func TestAuditOfAStoreOnlyTarget(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	reported := make(chan struct{})
	service := latestOnly{Store: b.stores[0], reported: reported}
	broken := "https://user:secret@broken.example/"
	b.a.Targets = func(context.Context, string) ([]audit.Target, error) {
		return []audit.Target{{Name: "https://storage.example/", URL: "https://storage.example/", Store: service},
			{Name: "https://user:xxxxx@broken.example/", URL: broken, Err: fmt.Errorf("storage %s: connection refused", broken)}}, nil
	}
	b.deposit("ark:/99999/fk4a", 1, object{"a.txt": "one"})
	b.deposit("ark:/99999/fk4a", 2, object{"a.txt": "two"})
	b.deposit("ark:/99999/fk4b", 1, object{"a.txt": "one"})
	b.write(0, "ark:/99999/fk4b", "v1/content/a.txt", []byte("one, changed"))
	older := b.backup(0, "ark:/99999/fk4a")
	b.deposit("ark:/99999/fk4a", 3, object{"a.txt": "three"})
	b.restore(0, "ark:/99999/fk4a", older)

	var got []audit.Finding
	var progress []audit.Counts
	sum, err := b.a.Run(t.Context(), audit.Options{Fixity: true, Every: time.Millisecond}, audit.Report{
		Finding: func(f audit.Finding) error { got = append(got, f); return nil },
		Progress: func(c audit.Counts) error {
			if len(progress) == 0 {
				close(reported)
			}
			progress = append(progress, c)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	b.targets = []string{"https://storage.example/", "https://user:xxxxx@broken.example/"}
	b.check("a store only", got, []want{
		{audit.VersionsMissing, "ark:/99999/fk4a", 0, 3, ""},
		{audit.TargetFailed, "ark:/99999/fk4a", 1, 0, ""},
		{audit.FileDiffers, "ark:/99999/fk4b", 0, 1, "a.txt"},
		{audit.TargetFailed, "ark:/99999/fk4b", 1, 0, ""},
	})
	if len(progress) == 0 || progress[0].Objects != 0 {
		t.Errorf("progress %+v, want counts reported while the first object waits", progress)
	}
	if len(sum.Notes) != 1 || !strings.Contains(sum.Notes[0], "https://storage.example/ is a storage service") || sum.BytesRead != 0 {
		t.Errorf("summary %+v: want one note on the storage service, no bytes read", sum)
	}
	for _, f := range got {
		if strings.Contains(f.Message, "secret") || f.Kind == audit.TargetFailed && !strings.Contains(f.Message, "connection refused") {
			t.Errorf("finding %q: want the error, without the password", f.Message)
		}
	}
}

// failingList is an inventory whose listing fails after the first page.
type failingList struct{ audit.Inventory }

func (f failingList) List(ctx context.Context, after string, limit int) ([]inventory.ObjectRow, error) {
	if after != "" {
		return nil, errors.New("connection refused")
	}
	return f.Inventory.List(ctx, after, limit)
}

// An inventory that cannot list its objects ends the audit: the objects
// listed before are reported, and the error says where to take it up.
func TestAuditEndsWhenTheInventoryCannotList(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	b.deposit("ark:/99999/fk4a", 1, object{"a.txt": "one"})
	b.deposit("ark:/99999/fk4b", 1, object{"a.txt": "two"})
	b.a.Inventory = failingList{b.inv}
	sum, err := b.a.Run(t.Context(), audit.Options{}, audit.Report{})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "after=ark:/99999/fk4b") {
		t.Errorf("audit: %v, want the listing's error and where to take the audit up", err)
	}
	if sum.Objects != 2 || sum.Last != "ark:/99999/fk4b" {
		t.Errorf("summary %+v, want the 2 objects listed before audited", sum)
	}
}

// An audit whose context ends stops at once, mid-object, and says so.
func TestAuditStopsWithItsContext(t *testing.T) {
	t.Parallel()
	b := newBench(t, "", t.TempDir())
	b.deposit("ark:/99999/fk4a", 1, object{"a.txt": "one"})
	stuck := latestOnly{Store: b.stores[0], reported: make(chan struct{})} // never opens
	b.a.Targets = func(context.Context, string) ([]audit.Target, error) {
		return []audit.Target{{Name: "stuck", Store: stuck}}, nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var found []audit.Finding
	sum, err := b.a.Run(ctx, audit.Options{Every: time.Millisecond}, audit.Report{
		Finding:  func(f audit.Finding) error { found = append(found, f); return nil },
		Progress: func(audit.Counts) error { cancel(); return nil }})
	if !errors.Is(err, context.Canceled) || sum.Objects != 0 || len(found) != 0 {
		t.Errorf("audit: %v, %+v, findings %+v; want context.Canceled and the object cut short unreported", err, sum, found)
	}
}

// recordFails is an inventory that takes no record.
type recordFails struct{ audit.Inventory }

func (recordFails) Record(context.Context, inventory.Record) error {
	return errors.New("connection refused")
}

// auditRecords audits with fixity and record: each version read back at
// each target gets one fixity check event in the inventory (a success, a
// failure naming the damaged file, a failure where the copy is lost),
// nothing else of the version changes, and a second audit adds its own.
func auditRecords(t *testing.T, b *bench) {
	const (
		arkTwo     = "ark:/99999/fk4a-two"     // two versions, intact
		arkLonely  = "ark:/99999/fk4b-lonely"  // not in the replica
		arkChanged = "ark:/99999/fk4c-changed" // its bytes changed in the replica
	)
	b.a.Agent = "ingestq test on host1"
	b.deposit(arkTwo, 1, object{"a.txt": "one", "sub/b.txt": "beta"})
	b.deposit(arkTwo, 2, object{"a.txt": "two", "sub/b.txt": "beta"})
	b.record(arkLonely, profile, 1, b.put(arkLonely, object{"a.txt": "lonely"}, 0))
	b.deposit(arkChanged, 1, object{"a.txt": "alpha", "sub/b.txt": "beta"})
	b.write(1, arkChanged, "v1/content/a.txt", []byte("ALPHA"))
	// Ingest's own replica and event, which the audit's must leave as they are.
	ingested := inventory.Event{ID: "0f8fad5b-d9cb-469f-a165-70867728950e", Type: inventory.EventIngestion,
		At: time.Date(2026, 11, 1, 12, 0, 1, 0, time.UTC), Outcome: inventory.OutcomeSuccess, Agent: "ingestq v1 on host0", Detail: "ingested"}
	v1, err := b.inv.Object(t.Context(), arkTwo)
	if err != nil {
		t.Fatal(err)
	}
	r := v1.Versions[0]
	r.Replicas = []inventory.Replica{{Target: b.targets[0], URL: b.targets[0] + "/x", Verified: ingested.At}}
	r.Events = []inventory.Event{ingested}
	if err := b.inv.Record(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	before := map[string]inventory.ObjectDetail{}
	for _, ark := range []string{arkTwo, arkLonely, arkChanged} {
		if before[ark], err = b.inv.Object(t.Context(), ark); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := b.a.Run(t.Context(), audit.Options{Record: true}, audit.Report{}); !errors.Is(err, inventory.ErrInvalid) ||
		!strings.Contains(err.Error(), "record without fixity") {
		t.Errorf("record without fixity: %v, want ErrInvalid naming it", err)
	}
	ids := map[string]bool{}
	for round := 1; round <= 2; round++ {
		got, sum := b.run(audit.Options{Fixity: true, Record: true})
		b.check(fmt.Sprintf("round %d", round), got, []want{
			{audit.ObjectMissing, arkLonely, 1, 0, ""},
			{audit.FixityFailed, arkChanged, 1, 1, "a.txt"},
		})
		// Versions 1 and 2 of arkTwo and the other two's version 1, at 2 targets.
		if sum.EventsRecorded != 8 {
			t.Errorf("round %d: %d events recorded, want 8", round, sum.EventsRecorded)
		}
		for ark, was := range before {
			d, err := b.inv.Object(t.Context(), ark)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range d.Versions {
				old := was.Versions[i]
				var checks []inventory.Event
				v.Events = slices.DeleteFunc(v.Events, func(e inventory.Event) bool {
					audited := e.Type == inventory.EventFixityCheck
					if audited {
						checks = append(checks, e)
					}
					return audited
				})
				if !slices.Equal(v.Files, old.Files) || !slices.Equal(v.Replicas, old.Replicas) || !slices.Equal(v.Events, old.Events) ||
					!slices.Equal(v.LocalIDs, old.LocalIDs) || v.Batch != old.Batch || !v.Created.Equal(old.Created) {
					t.Errorf("round %d: %s version %d is now %+v, want what it was, %+v, with the audit's events", round, ark, v.Version, v, old)
				}
				if len(checks) != 2*round {
					t.Fatalf("round %d: %s version %d has %d fixity check events, want %d", round, ark, v.Version, len(checks), 2*round)
				}
				for _, e := range checks {
					if !ids[e.ID] {
						ids[e.ID] = true
						b.checkEvent(ark, v.Version, e)
					}
				}
			}
		}
	}
	if len(ids) != 16 {
		t.Errorf("%d distinct event ids over two audits, want 16: a new one for each check", len(ids))
	}

	// An inventory that does not take the events: a finding of each version,
	// and the walk goes on.
	b.a.Inventory = recordFails{b.inv}
	got, sum := b.run(audit.Options{Fixity: true, Record: true, ARKs: []string{arkTwo, arkLonely}})
	b.check("record fails", got, []want{
		{audit.RecordFailed, arkTwo, -1, 1, ""}, {audit.RecordFailed, arkTwo, -1, 2, ""},
		{audit.ObjectMissing, arkLonely, 1, 0, ""}, {audit.RecordFailed, arkLonely, -1, 1, ""},
	})
	if sum.EventsRecorded != 0 || !strings.Contains(got[0].Message, "connection refused") {
		t.Errorf("record fails: %d events recorded, %q; want none, and the error", sum.EventsRecorded, got[0].Message)
	}
}

// checkEvent checks one fixity check event the audit recorded for version
// n of ark: its outcome and detail by what was damaged where.
func (b *bench) checkEvent(ark string, n int, e inventory.Event) {
	b.t.Helper()
	target := -1
	for i, name := range b.targets {
		if strings.HasPrefix(e.Detail, "audit with fixity at storage target "+name+":") {
			target = i
		}
	}
	outcome, says := inventory.OutcomeSuccess, fmt.Sprintf("of version %d read back and hashed", n)
	switch {
	case target == 1 && strings.HasSuffix(ark, "-lonely"):
		outcome, says = inventory.OutcomeFailure, "the target has no version 1 of this object (object-missing)"
	case target == 1 && strings.HasSuffix(ark, "-changed"):
		outcome, says = inventory.OutcomeFailure, `2 of 2 recorded files of version 1 read back and hashed (9 bytes); 1 failed: "a.txt" (fixity-failed)`
	case strings.HasSuffix(ark, "-lonely"):
		says = "1 of 1 recorded files of version 1 read back and hashed (6 bytes), each matching its recorded SHA-256"
	}
	if _, err := uuid.Parse(e.ID); err != nil || target < 0 || e.Outcome != outcome || !strings.Contains(e.Detail, says) ||
		e.Agent != b.a.Agent || e.File != "" || time.Since(e.At) > time.Minute {
		b.t.Errorf("%s version %d: event %+v; want a UUID, outcome %s, a detail naming a target and saying %q, agent %q, no file, now",
			ark, n, e, outcome, says, b.a.Agent)
	}
}

func TestAuditRecordsFixityChecks(t *testing.T)                { auditRecords(t, localBench(t)) }
func TestAuditRecordsFixityChecksOnS3AndPostgres(t *testing.T) { auditRecords(t, cloudBench(t)) }
