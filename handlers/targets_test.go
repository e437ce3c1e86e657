package handlers_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage/ocfl/ocfltest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// An audit writes nothing to a profile's own target where nothing was
// stored (an empty folder, a folder that is not there): it stays as it
// was, and the profile's object there is a target-failed finding saying
// there is no OCFL storage root. Storing there makes the root as before.
func TestAuditWritesNothingToAnEmptyTarget(t *testing.T) {
	t.Parallel()
	t.Run("empty folder", func(t *testing.T) {
		t.Parallel()
		auditThenStore(t, t.TempDir())
	})
	t.Run("no folder", func(t *testing.T) {
		t.Parallel()
		auditThenStore(t, filepath.Join(t.TempDir(), "mistyped"))
	})
}

// The same with the target an empty prefix of a bucket.
func TestAuditWritesNothingToAnEmptyBucketPrefix(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	auditThenStore(t, srv.URL(srv.Addr, "empty"))
}

// auditThenStore audits, then stores, a profile whose own target is
// target, where nothing was stored.
func auditThenStore(t *testing.T, target string) {
	prof := profile.Default()
	prof.Storage = target
	r := newRig(t, prof, withStorage(t.TempDir()))
	lost := "ark:/99999/~lost" // recorded as stored there: after the minted ARK in ARK order
	if err := r.p.Inventory().Record(t.Context(), inventory.Record{ARK: lost, Profile: prof.Name, Version: 1,
		Files: []inventory.FileRow{{Name: "a.txt", Size: 3, SHA256: sha256hex([]byte("one"))}}}); err != nil {
		t.Fatal(err)
	}

	before := filesAt(t, target)
	found := auditAll(t, r.p)
	if len(found) != 1 || found[0].Kind != audit.TargetFailed || found[0].ARK != lost || found[0].Target != target ||
		!strings.Contains(found[0].Message, "no OCFL storage root at") ||
		!strings.Contains(found[0].Message, "nothing was ever stored there, or its profile names the wrong place") {
		t.Errorf("findings %+v, want %s's target %s without an OCFL storage root", found, lost, target)
	}
	if after := filesAt(t, target); !slices.Equal(after, before) {
		t.Fatalf("the audit wrote to %s: it held %q, then %q", target, before, after)
	}

	one := object{"a.txt": []byte("one")}
	j := r.deposit("/empty/v1.checkm", one)
	if j.State() != queue.Completed {
		t.Fatalf("job %s is %s: %s", j.ID, j.State(), j.Status.Message)
	}
	if files := filesAt(t, target); !slices.Contains(files, "0=ocfl_1.1") {
		t.Errorf("after Storing, %s holds %q, want an OCFL storage root", target, files)
	}
	validateTarget(t, target)
	found = auditAll(t, r.p)
	if len(found) != 1 || found[0].Kind != audit.ObjectMissing || found[0].ARK != lost {
		t.Errorf("findings after Storing %+v, want only %s missing (the stored object audited at the new root)", found, lost)
	}
}

// auditAll runs p's audit of every object and returns its findings.
func auditAll(t *testing.T, p *handlers.Pipeline) []audit.Finding {
	t.Helper()
	var found []audit.Finding
	if _, err := p.Auditor().Run(t.Context(), audit.Options{}, audit.Report{Finding: func(f audit.Finding) error {
		found = append(found, f)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	return found
}

// filesAt is what target holds: an S3 prefix's keys, a folder's files
// and folders, or "(no folder)". It writes nothing.
func filesAt(t *testing.T, target string) []string {
	t.Helper()
	if strings.HasPrefix(target, "s3://") {
		return allKeys(t, target)
	}
	return ocfltest.Files(t, target)
}

// An audit's open of a target that does not answer does not hold up
// Storing's open of another target: a target is opened outside the lock
// every open takes. 20 s bound the audit's open, so that the test fails,
// rather than hangs, when Storing waits for it.
func TestAuditOfAStuckTargetHoldsUpNoStoring(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test") // not parallel: the process's variables
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	stuck := silentServer(t)
	other := profile.Default()
	other.Name, other.Storage = "stuck", "s3://bucket?endpoint="+stuck.addr+"&secure=false&idletimeout=10m"
	prof := profile.Default()
	prof.Storage = t.TempDir() // opened by Storing, after the audit's open began
	r := newRig(t, prof, withStorage(t.TempDir()), func(hc *handlers.Config, _ *reactor.Config) {
		set, err := profile.NewSet(prof, other)
		if err != nil {
			t.Fatal(err)
		}
		hc.Profiles = set
	})

	auditCtx, cancelAudit := context.WithCancel(t.Context())
	defer cancelAudit()
	var cut atomic.Bool // the bound below ended the audit's open
	bound := time.AfterFunc(20*time.Second, func() { cut.Store(true); cancelAudit() })
	defer bound.Stop()
	opened := make(chan []audit.Target, 1)
	go func() {
		targets, _ := r.p.AuditTargets(auditCtx, "stuck")
		opened <- targets
	}()
	<-stuck.asked // the audit's open is in its network call

	one := object{"a.txt": []byte("one")}
	j := r.deposit("/stuck/v1.checkm", one)
	if j.State() != queue.Completed {
		t.Errorf("job %s is %s: %s", j.ID, j.State(), j.Status.Message)
	}
	if cut.Load() {
		t.Errorf("Storing waited for the audit's open of a stuck target, until the test's bound ended that open")
	}
	cancelAudit()
	if targets := <-opened; len(targets) != 1 || !errors.Is(targets[0].Err, context.Canceled) {
		t.Errorf("the stuck target: %+v, want the audit's open ended by its context", targets)
	}
}

// silent is a server that takes connections and never answers, as a hung
// host does.
type silent struct {
	addr  string
	asked chan struct{} // closed at the first connection
}

func silentServer(t *testing.T) *silent {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silent{addr: ln.Addr().String(), asked: make(chan struct{})}
	var conns []net.Conn // the accepting goroutine's until wg.Wait
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed
			}
			if conns = append(conns, c); len(conns) == 1 {
				close(s.asked)
			}
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return s
}
