package handlers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/pgtest"
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

	var found []audit.Finding
	sum, err := r.p.Auditor().Run(context.Background(), audit.Options{Fixity: true}, audit.Report{Finding: func(f audit.Finding) error {
		found = append(found, f)
		return nil
	}})
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

	var found []audit.Finding
	sum, err := r.p.Auditor().Run(context.Background(), audit.Options{}, audit.Report{Finding: func(f audit.Finding) error {
		found = append(found, f)
		return nil
	}})
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
