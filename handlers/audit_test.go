package handlers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The daemon's audit: an object the pipeline stored is audited at each
// target of its profile, named as the profile names it; a replica that
// lost it is a finding; an object of a profile the daemon does not have
// is one too, not a crash; a target's password is never shown.
func TestPipelineAuditsItsProfilesTargets(t *testing.T) {
	t.Parallel()
	primary, replica := t.TempDir(), t.TempDir()
	service := profile.Default()
	service.Name, service.Storage = "service", "http://user:secret@127.0.0.1:1/storage" // nothing listens there
	r := newRig(t, nil, withStorage(primary, replica), func(hc *handlers.Config, _ *reactor.Config) {
		set, err := profile.NewSet(profile.Default(), service)
		if err != nil {
			t.Fatal(err)
		}
		hc.Profiles = set
	})
	one := object{"a.txt": []byte("one")}
	ark := r.checkStored(r.deposit("/audit/v1.checkm", one, "local_id", "audit-1"), one)
	restoreObject(t, replica, ark, nil) // the replica lost it

	if _, err := r.p.AuditTargets(t.Context(), "nope"); err == nil || !strings.Contains(err.Error(), `no profile "nope"`) {
		t.Errorf("the targets of an unknown profile: %v, want an error naming it", err)
	}
	targets, err := r.p.AuditTargets(t.Context(), "service")
	if err != nil || len(targets) != 1 || targets[0].Name != "http://user:xxxxx@127.0.0.1:1/storage" || targets[0].Store == nil {
		t.Errorf("the service profile's targets: %+v (%v), want its storage service, the password redacted", targets, err)
	}

	// An object recorded by a daemon with another profile.
	if err := r.p.Inventory().Record(t.Context(), inventory.Record{ARK: "ark:/99999/~gone", Profile: "gone", Version: 1,
		Files: []inventory.FileRow{{Name: "a.txt", Size: 3, SHA256: sha256hex([]byte("one"))}}}); err != nil {
		t.Fatal(err)
	}

	found, sum, err := runAudit(r, audit.Options{Fixity: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[0].Kind != audit.ObjectMissing || found[0].ARK != ark || found[0].Target != replica ||
		found[1].Kind != audit.UnknownProfile || !strings.Contains(found[1].Message, `no profile "gone"`) {
		t.Errorf("findings %+v, want the replica %s missing %s, and the profile of ark:/99999/~gone unknown", found, replica, ark)
	}
	if sum.Objects != 2 || sum.BytesRead == 0 {
		t.Errorf("summary %+v, want 2 objects, the copy of one in the primary read", sum)
	}
}

// An object recorded only in its profile's own inventory (PostgreSQL) is
// audited by the daemon's audit: its replica's loss is found.
func TestPipelineAuditsAProfilesOwnInventory(t *testing.T) {
	t.Parallel()
	primary, replica := t.TempDir(), t.TempDir()
	own := profile.Default()
	own.Inventory = pgtest.NewDatabase(t, pgtest.Start(t))
	r := newRig(t, own, withStorage(primary, replica))
	one := object{"a.txt": []byte("one")}
	j := r.deposit("/audit/own.checkm", one, "local_id", "own-1")
	if j.State() != queue.Completed || j.Identifiers == nil {
		t.Fatalf("job %s is %s: %s", j.ID, j.State(), j.Status.Message)
	}
	ark := j.Identifiers.PrimaryID
	if _, err := r.p.Inventory().Object(t.Context(), ark); err == nil {
		t.Fatalf("%s is in the daemon's inventory, want it only in its profile's", ark)
	}
	restoreObject(t, replica, ark, nil) // the replica lost it

	found, sum, err := runAudit(r, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Kind != audit.ObjectMissing || found[0].ARK != ark || found[0].Target != replica {
		t.Errorf("findings %+v, want the replica %s missing %s", found, replica, ark)
	}
	if sum.Objects != 1 || sum.Last != ark {
		t.Errorf("summary %+v, want 1 object, %s", sum, ark)
	}
}

// The inventory restored from a dump older than storage (S3, PostgreSQL):
// an object stored since the dump is in no record, and the audit finds it
// by listing the target (object-unrecorded, naming the job that stored it
// and that the queue wants holding), beside the version stored since of an
// object the dump has (versions-unrecorded), also once a deposit recorded
// a later version over it. Walking the inventory alone audited one object
// and found nothing of the other; the version under the later one was a
// file-extra finding for each of its files. The repair records that version
// under the later one.
func TestAuditFindsObjectsOfAnInventoryRestoredOlder(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	primary := srv.URL(srv.Addr, "ocfl")
	pg := pgtest.Start(t)
	invURL := pgtest.NewDatabase(t, pg)
	r := newRig(t, nil, withStorage(primary), withInventory(invURL))
	one, two := object{"a.txt": []byte("one")}, object{"a.txt": []byte("two")}
	kept := r.checkStored(r.deposit("/restored/kept-v1.checkm", one, "local_id", "kept"), one)
	dump, err := pg.Dump(invURL)
	if err != nil {
		t.Fatal(err)
	}
	r.checkStored(r.deposit("/restored/kept-v2.checkm", two, "local_id", "kept"), two)
	lostJob := r.deposit("/restored/lost.checkm", one, "local_id", "lost")
	lost := r.checkStored(lostJob, one)
	if err := pg.Restore(invURL, dump); err != nil {
		t.Fatal(err)
	}

	found, sum, err := runAudit(r, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]audit.Kind{}
	for _, f := range found {
		kinds[f.ARK] = f.Kind
		if f.Target != primary {
			t.Errorf("%s names target %q, want %s", f, f.Target, primary)
		}
	}
	if len(found) != 2 || kinds[kept] != audit.VersionsUnrecorded || kinds[lost] != audit.ObjectUnrecorded {
		t.Fatalf("findings:\n%s\nwant %s versions-unrecorded and %s object-unrecorded", findingLines(found), kept, lost)
	}
	for _, f := range found {
		if f.Kind == audit.ObjectUnrecorded && (!strings.Contains(f.Message, "job "+lostJob.ID) ||
			!strings.Contains(f.Message, "version 1") || !strings.Contains(f.Message, "ingestq hold queue")) {
			t.Errorf("object-unrecorded says %q, want its version, the job %s that stored it, and to hold the queue", f.Message, lostJob.ID)
		}
	}
	if sum.Objects != 1 || sum.Findings != 2 || sum.Last != max(kept, lost) {
		t.Errorf("summary %+v, want 1 object audited (the recorded one), 2 findings, the last ARK %s", sum, max(kept, lost))
	}

	// A deposit of an earlier release to the object the dump has stored
	// and recorded version 3 over the unrecorded 2 (Storing now refuses to,
	// TestStoringWritesNothingOverVersionsTheInventoryLost): the audit names
	// version 2 unrecorded, not each of its files extra.
	recordOverHole(t, r, primary, kept, 3, object{"a.txt": []byte("three")})
	found, _, err = runAudit(r, audit.Options{ARKs: []string{kept}})
	if err != nil || len(found) != 1 || found[0].Kind != audit.VersionsUnrecorded || found[0].Version != 2 ||
		!strings.Contains(found[0].Message, "records version 3 after them") {
		t.Errorf("audit of %s after version 3 was recorded: %v, findings:\n%s\nwant version 2 unrecorded", kept, err, findingLines(found))
	}

	// Given ARKs, the audit lists no target but asks each whether it holds
	// one no inventory records: the unrecorded one is object-unrecorded.
	found, sum, err = runAudit(r, audit.Options{ARKs: []string{lost, "ark:/99999/fk4nothing"}})
	if err != nil || len(found) != 2 || found[0].Kind != audit.ObjectUnrecorded || found[0].ARK != lost ||
		found[0].Target != primary || found[1].Kind != audit.NotRecorded || sum.NotRecorded != 1 {
		t.Errorf("audit of %s and an ARK nothing holds: %v, findings:\n%s\nwant object-unrecorded at %s, then one not-recorded",
			lost, err, findingLines(found), primary)
	}

	// The queue held, the repair by ARK records version 2 under the
	// recorded 3, and the unrecorded object.
	if _, err := r.q.HoldQueue(t.Context(), queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	var repaired []string
	found, sum, err = runAuditWith(r, audit.Options{Repair: true, ARKs: []string{kept, lost}}, func(rp audit.Repaired) {
		repaired = append(repaired, fmt.Sprintf("%s v%d", rp.ARK, rp.Version))
	})
	want := []string{kept + " v2", lost + " v1"}
	if lost < kept {
		want = []string{lost + " v1", kept + " v2"}
	}
	if err != nil || len(found) != 0 || sum.Repaired != 2 || !slices.Equal(repaired, want) {
		t.Errorf("repair of %s and %s: %v, repaired %v, findings:\n%s\nwant %v, no finding", kept, lost, err, repaired,
			findingLines(found), want)
	}
}

// recordOverHole stores version n of ark, of obj's files, in primary and
// records it, as a release before Storing's refusal (pastRecord) did over
// versions the inventory lost.
func recordOverHole(t *testing.T, r *rig, primary, ark string, n int, obj object) {
	t.Helper()
	dir := t.TempDir()
	var files []storage.File
	var rows []inventory.FileRow
	for name, data := range obj {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, storage.File{Name: "producer/" + name, Path: path, Size: int64(len(data)), SHA256: sha256hex(data)})
		rows = append(rows, inventory.FileRow{Name: "producer/" + name, Size: int64(len(data)), SHA256: sha256hex(data)})
	}
	v, err := openTarget(t, primary).Put(t.Context(), storage.Object{ARK: ark, Files: files})
	if err != nil || v.Number != n {
		t.Fatalf("version %d of %s stored as %d (%v)", n, ark, v.Number, err)
	}
	rec := inventory.Record{ARK: ark, Profile: r.prof.Name, Version: n, Created: v.Created, Job: "older", Files: rows}
	if err := r.p.Inventory().Record(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
}

// runAudit runs the daemon's audit with opt and returns what it found.
func runAudit(r *rig, opt audit.Options) ([]audit.Finding, audit.Summary, error) {
	return runAuditWith(r, opt, func(audit.Repaired) {})
}

// findingLines are the findings as the CLI prints them, a line each.
func findingLines(fs []audit.Finding) string {
	var lines []string
	for _, f := range fs {
		lines = append(lines, f.String())
	}
	return strings.Join(lines, "\n")
}
