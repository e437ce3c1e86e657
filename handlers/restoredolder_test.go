package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Storage restored from a backup older than the inventory: a deposit to an
// object whose versions the inventory records and a target lacks fails at
// Storing, naming the ARK, the target, both versions and what to do, and
// writes nothing; once the object is restored, a requeue stores the new
// version as the next one. Local OCFL roots (a primary and a replica) and
// the embedded inventory.
func TestStorageRestoredOlderThanTheInventoryIsNotWritten(t *testing.T) {
	t.Parallel()
	primary, replica := t.TempDir(), t.TempDir()
	restoredOlder(t, newRig(t, nil, withStorage(primary, replica)), primary, replica)
}

// The same with the primary on S3 and the inventory in PostgreSQL.
func TestStorageRestoredOlderOnS3AndPostgres(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	primary, replica := srv.URL(srv.Addr, "ocfl"), t.TempDir()
	r := newRig(t, nil, withStorage(primary, replica), withInventory(pgtest.NewDatabase(t, pgtest.Start(t))))
	restoredOlder(t, r, primary, replica)
}

// restoredOlder runs, on an object of its own each, a target restored to
// version 1 (the primary; a replica) and a primary that lost the object.
func restoredOlder(t *testing.T, r *rig, primary, replica string) {
	for i, c := range []restoredCase{
		{"primary restored to version 1", primary, false, "this target has version 1 as its latest"},
		{"primary without the object", primary, true, "this target has no version of it"},
		{"replica restored to version 1", replica, false, "this target has version 1 as its latest"},
	} {
		c.run(t, r, fmt.Sprintf("restored-%d", i), primary, replica)
	}
}

type restoredCase struct {
	name    string
	target  string // the target restored older
	lost    bool   // the whole object is gone, not only version 2
	wantHas string // what the message says the target has
}

// run stores versions 1 and 2 of the object of local id local, restores
// c.target's copy to version 1 (or none), and deposits version 3. A case
// that goes wrong says so and returns: the next one runs.
func (c restoredCase) run(t *testing.T, r *rig, local, primary, replica string) {
	dir := "/" + local
	v1 := r.deposit(dir+"/v1.checkm", object{"a.txt": []byte("one")}, "local_id", local)
	ark := r.checkStored(v1, object{"a.txt": []byte("one")})
	backup := backupObject(t, c.target, ark)
	if c.lost {
		backup = nil
	}
	r.checkStored(r.deposit(dir+"/v2.checkm", object{"a.txt": []byte("two")}, "local_id", local), object{"a.txt": []byte("two")})
	newer := backupObject(t, c.target, ark) // what a replica or a newer backup holds
	restoreObject(t, c.target, ark, backup)
	keys := map[string][]string{primary: allKeys(t, primary), replica: allKeys(t, replica)}
	recorded, err := r.p.Inventory().Object(t.Context(), ark)
	if err != nil {
		t.Fatal(err)
	}

	three := object{"a.txt": []byte("three")}
	b := r.waitBatch(r.submitObject(dir+"/v3.checkm", three, "local_id", local).ID, queue.Completed, queue.Failed)
	j := r.jobsOf(b.ID)["manifest"]
	if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, string(queue.Storing)) {
		t.Errorf("%s: job %s: %q, want Failed at Storing", c.name, j.State(), j.Status.Message)
		return
	}
	for _, w := range []string{c.target, "the inventory records version 2 of " + ark, c.wantHas,
		"nothing was written", "Backups and recovery", "`ingestq requeue " + j.ID + "`"} {
		if !strings.Contains(j.Status.Message, w) {
			t.Errorf("%s: message %q does not say %q", c.name, j.Status.Message, w)
		}
	}
	for target, before := range keys {
		if after := allKeys(t, target); !slices.Equal(after, before) {
			t.Errorf("%s: %s was written: %d keys before, %d after", c.name, target, len(before), len(after))
		}
		validateTarget(t, target)
	}
	if after, err := r.p.Inventory().Object(t.Context(), ark); err != nil || !reflect.DeepEqual(after, recorded) {
		t.Errorf("%s: the inventory changed: %+v (%v), was %+v", c.name, after, err, recorded)
	}

	// The operator restores the object, then requeues: version 3.
	restoreObject(t, c.target, ark, newer)
	if out := r.ingestq("requeue", j.ID); !strings.Contains(out, string(queue.Storing)) {
		t.Errorf("%s: requeue said %q, want it to name Storing", c.name, out)
	}
	r.ingestq("report", b.ID)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Errorf("%s: after restore and requeue: batch %s (%s)", c.name, b.State(), b.Status.Message)
		return
	}
	if j, err = r.q.LoadJob(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	r.checkStored(j, three)
	r.checkCopies(j, ark, 3, primary, replica)
	validateTarget(t, primary)
	validateTarget(t, replica)
}

// backupObject is every key of ark's object in target, with its bytes: a
// backup of the object as it is now.
func backupObject(t testing.TB, target, ark string) map[string][]byte {
	t.Helper()
	pl, out := openPlace(t, target), map[string][]byte{}
	for _, k := range keysUnder(t, target, ocfltest.ObjectRoot(ark)+"/") {
		rc, err := pl.Open(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		out[k], err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// restoreObject puts ark's object in target back as backup holds it, as a
// restore from a backup or a replica would: what the object has beyond it
// is removed (none: the object is gone).
func restoreObject(t testing.TB, target, ark string, backup map[string][]byte) {
	t.Helper()
	pl := openPlace(t, target)
	for _, k := range keysUnder(t, target, ocfltest.ObjectRoot(ark)+"/") {
		if err := pl.Delete(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	for k, data := range backup {
		if err := pl.Put(context.Background(), k, bytes.NewReader(data), int64(len(data)), sha256hex(data)); err != nil {
			t.Fatal(err)
		}
	}
}
