package handlers_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The repair after the inventory was restored from a dump older than
// storage (S3 primary, a local replica, PostgreSQL): refused while the
// ingest queue runs; held, it records the lost object and the lost
// version from the primary (files and digests, job and batch, local ids
// and ERC, a copy at each target, its event), a second audit is clean, and
// a deposit of the lost object's local id adds a version to it. A version
// recorded with other content is not overwritten: it stays a finding, and
// the version after it is recorded. An object whose local id a deposit
// since the restore gave another ARK is a repair-failed finding naming it,
// and the walk goes on.
func TestAuditRepairRecordsWhatAnInventoryRestoredOlderLost(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	primary, replica := srv.URL(srv.Addr, "ocfl"), t.TempDir()
	pg := pgtest.Start(t)
	invURL := pgtest.NewDatabase(t, pg)
	r := newRig(t, nil, withStorage(primary, replica), withInventory(invURL))
	ctx := t.Context()
	one, two := object{"a.txt": []byte("one")}, object{"a.txt": []byte("two")}
	kept := r.checkStored(r.deposit("/repair/kept-v1.checkm", one, "local_id", "kept"), one)
	dump, err := pg.Dump(invURL)
	if err != nil {
		t.Fatal(err)
	}
	keptJob := r.deposit("/repair/kept-v2.checkm", two, "local_id", "kept")
	r.checkStored(keptJob, two)
	lostJob := r.deposit("/repair/lost.checkm", one, "local_id", "lost", "erc_who", "Poet, A.", "erc_what", "Lost poems",
		"erc_where", "shelf 9")
	lost := r.checkStored(lostJob, one)
	if err := pg.Restore(invURL, dump); err != nil {
		t.Fatal(err)
	}

	// Refused while the queue runs, naming the hold.
	_, _, err = runAudit(r, audit.Options{Repair: true})
	if !errors.Is(err, audit.ErrNotHeld) || !strings.Contains(err.Error(), "ingestq hold queue") {
		t.Fatalf("repair with the queue running: %v, want it refused naming `ingestq hold queue`", err)
	}
	if _, err := r.p.Inventory().Object(ctx, lost); !errors.Is(err, inventory.ErrNotFound) {
		t.Fatalf("the refused repair recorded %s: %v", lost, err)
	}

	if _, err := r.q.HoldQueue(ctx, queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	var repaired []audit.Repaired
	found, sum, err := runAuditWith(r, audit.Options{Repair: true}, func(rp audit.Repaired) { repaired = append(repaired, rp) })
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 0 || sum.Repaired != 2 || sum.Objects != 2 || len(repaired) != 2 {
		t.Fatalf("repair: summary %+v, repaired %+v, findings:\n%s\nwant 2 versions repaired, 2 objects audited, no finding",
			sum, repaired, findingLines(found))
	}
	byARK := map[string]audit.Repaired{}
	for _, rp := range repaired {
		byARK[rp.ARK] = rp
		if rp.Target != primary || !strings.HasPrefix(rp.String(), "repaired: version ") {
			t.Errorf("%s: want it read from the primary %s", rp, primary)
		}
	}
	if rp := byARK[kept]; rp.Version != 2 || rp.Job != keptJob.ID || rp.Batch != keptJob.BatchID {
		t.Errorf("repaired of %s: %+v, want version 2 of job %s", kept, rp, keptJob.ID)
	}
	if rp := byARK[lost]; rp.Version != 1 || rp.Job != lostJob.ID {
		t.Errorf("repaired of %s: %+v, want version 1 of job %s", lost, rp, lostJob.ID)
	}

	// What was recorded is what storage holds, and what Recording had.
	d, err := r.p.Inventory().Object(ctx, lost)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := openTarget(t, primary).Read(ctx, lost)
	if err != nil {
		t.Fatal(err)
	}
	v := d.Versions[0]
	sv := stored.Versions()[0]
	var files []inventory.FileRow
	for _, f := range sv.Files {
		files = append(files, inventory.FileRow{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
	}
	if len(d.Versions) != 1 || d.Object.Profile != r.prof.Name || !slices.Equal(v.LocalIDs, []string{"lost"}) ||
		v.Job != lostJob.ID || v.Batch != lostJob.BatchID || !v.Created.Equal(sv.Created) || !slices.Equal(v.Files, files) ||
		v.Who != "Poet, A." || v.What != "Lost poems" || v.Where != "shelf 9" {
		t.Errorf("%s recorded as %+v, want profile %s, local id lost, job %s, batch %s, ERC, and the stored files %v",
			lost, d, r.prof.Name, lostJob.ID, lostJob.BatchID, files)
	}
	if len(v.Replicas) != 2 || v.Replicas[0].Target != primary && v.Replicas[1].Target != primary ||
		!slices.ContainsFunc(v.Replicas, func(c inventory.Replica) bool { return c.Target == replica && c.URL != "" }) {
		t.Errorf("%s's copies %+v, want one at %s and one at %s", lost, v.Replicas, primary, replica)
	}
	if len(v.Events) != 1 || v.Events[0].Type != inventory.EventIngestion || v.Events[0].Agent == "" ||
		!strings.Contains(v.Events[0].Detail, "audit --repair") || !strings.Contains(v.Events[0].Detail, "primary target "+primary) {
		t.Errorf("%s's events %+v, want the repair's, naming the primary", lost, v.Events)
	}
	if ark, ok, err := r.p.Inventory().LookupLocalID(ctx, r.prof.Name, "lost"); err != nil || !ok || ark != lost {
		t.Errorf("local id lost maps to %q (%v, %v), want %s", ark, ok, err, lost)
	}

	found, sum, err = runAudit(r, audit.Options{Fixity: true})
	if err != nil || len(found) != 0 || sum.Objects != 2 || sum.Versions != 3 {
		t.Errorf("the audit after the repair: %v, %+v, findings:\n%s\nwant 2 objects, 3 versions, none", err, sum, findingLines(found))
	}

	// A deposit of the lost object's local id adds its version 2.
	if _, err := r.q.ReleaseQueue(ctx, queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	three := object{"a.txt": []byte("three")}
	if again := r.checkStored(r.deposit("/repair/lost-v2.checkm", three, "local_id", "lost"), three); again != lost {
		t.Errorf("a deposit of local id lost made %s, want a version of %s", again, lost)
	}
	if d, err := r.p.Inventory().Object(ctx, lost); err != nil || d.Object.LatestVersion != 2 {
		t.Errorf("%s after a deposit: %+v (%v), want version 2", lost, d.Object, err)
	}

	// A version recorded with other content stays as recorded; an object
	// whose local id a deposit since the restore gave a second ARK is a
	// repair-failed finding naming both.
	odd := r.checkStored(r.deposit("/repair/odd-v1.checkm", one, "local_id", "odd"), one)
	if dump, err = pg.Dump(invURL); err != nil {
		t.Fatal(err)
	}
	r.checkStored(r.deposit("/repair/odd-v2.checkm", two, "local_id", "odd"), two)
	r.checkStored(r.deposit("/repair/odd-v3.checkm", three, "local_id", "odd"), three)
	dup := r.checkStored(r.deposit("/repair/dup.checkm", one, "local_id", "dup"), one)
	if err := pg.Restore(invURL, dump); err != nil {
		t.Fatal(err)
	}
	dupAgain := r.checkStored(r.deposit("/repair/dup-again.checkm", two, "local_id", "dup"), two)
	if dupAgain == dup {
		t.Fatalf("the deposit of local id dup after the restore took %s back, want a second ARK (the case the hold prevents)", dup)
	}
	other := inventory.Record{ARK: odd, Profile: r.prof.Name, LocalIDs: []string{"odd"}, Version: 2, Job: "other",
		Files: []inventory.FileRow{{Name: "a.txt", Size: 5, SHA256: sha256hex([]byte("other"))}}}
	if err := r.p.Inventory().Record(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := r.q.HoldQueue(ctx, queue.QueueIngest); err != nil {
		t.Fatal(err)
	}
	repaired = nil
	found, sum, err = runAuditWith(r, audit.Options{Repair: true}, func(rp audit.Repaired) { repaired = append(repaired, rp) })
	if err != nil || len(repaired) != 1 || repaired[0].ARK != odd || repaired[0].Version != 3 || sum.Repaired != 1 {
		t.Errorf("repair: %v, repaired %+v, want version 3 of %s alone", err, repaired, odd)
	}
	var dupFound []audit.Finding
	for _, f := range found {
		switch {
		case f.ARK == dup:
			dupFound = append(dupFound, f)
		case f.ARK != odd || f.Version != 2 || !slices.Contains([]audit.Kind{audit.FileMissing, audit.FileExtra}, f.Kind):
			t.Errorf("repair, finding %s: want only version 2 of %s found to differ, and %s's", f, odd, dup)
		}
	}
	if len(dupFound) != 3 || dupFound[0].Kind != audit.RepairFailed || dupFound[0].Version != 1 ||
		!strings.Contains(dupFound[0].Message, `local id "dup"`) || !strings.Contains(dupFound[0].Message, dupAgain) ||
		dupFound[1].Kind != audit.ObjectUnrecorded || dupFound[2].Kind != audit.ObjectUnrecorded {
		t.Errorf("repair of %s, findings:\n%s\nwant repair-failed naming local id dup and %s, then object-unrecorded at each target",
			dup, findingLines(dupFound), dupAgain)
	}
	if d, err := r.p.Inventory().Object(ctx, odd); err != nil || len(d.Versions) != 3 || d.Versions[1].Job != "other" ||
		!slices.Equal(d.Versions[1].Files, other.Files) {
		t.Errorf("%s after the repair: %+v (%v), want version 2 as recorded before, and 3 versions", odd, d, err)
	}
}

// runAuditWith is runAudit that also takes each repaired version.
func runAuditWith(r *rig, opt audit.Options, repaired func(audit.Repaired)) ([]audit.Finding, audit.Summary, error) {
	var found []audit.Finding
	sum, err := r.p.Auditor().Run(context.Background(), opt, audit.Report{
		Finding:  func(f audit.Finding) error { found = append(found, f); return nil },
		Repaired: func(rp audit.Repaired) error { repaired(rp); return nil },
	})
	return found, sum, err
}
