package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ingestq/ingestq/handlers/internal/durable"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// storeObject hands the object to storage under the object's storage lock.
// Storage makes a new version only when the content changed, so a job
// stored twice (a crash after storing, before the transition) keeps one
// version. The version is kept in the working folder for Recording.
func (p *Pipeline) storeObject(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, ark, err := p.identified(j)
	if err != nil {
		return reactor.Result{}, err
	}
	work := p.workDir(j.ID)
	entries, err := readStorageManifest(filepath.Join(work, storageManifest))
	if err != nil {
		return reactor.Result{}, reactor.Fatal(fmt.Errorf("storage manifest: %w (requeue the job from Processing)", err))
	}
	obj := storage.Object{ARK: ark, LocalIDs: j.Identifiers.LocalIDs}
	for _, e := range entries {
		obj.Files = append(obj.Files, storage.File{Name: e.Name, Path: e.Path, Size: e.Size, SHA256: e.SHA256})
	}
	var v storage.Version
	err = p.underLock(ctx, ark, p.q.LockStorage, p.q.UnlockStorage, func() error {
		v, err = p.storageFor(prof).Put(ctx, obj)
		return err
	})
	if err != nil {
		if storage.Refused(err) {
			return reactor.Result{}, reactor.Fatal(err)
		}
		return reactor.Result{}, err
	}
	data, _ := json.Marshal(v)
	kept := filepath.Join(work, storedRecord)
	if err := durable.WriteFile(kept, data); err != nil {
		return reactor.Result{}, err
	}
	// The working folder goes at Notify: both manifests now name the version
	// in storage, which stays.
	stored := queue.StepManifest{ManifestURL: v.URL}
	if j.Store != nil {
		stored.Mode = j.Store.Mode
	}
	return reactor.Result{
		Change: queue.JobChange{Store: &stored, Inventory: &stored},
		Attrs:  map[string]any{"ark": ark, "version": v.Number, "changed": v.Changed},
	}, nil
}

// record writes the stored version to the inventory, under the object's
// inventory lock. Recording the same version again changes nothing.
func (p *Pipeline) record(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, ark, err := p.identified(j)
	if err != nil {
		return reactor.Result{}, err
	}
	data, err := os.ReadFile(filepath.Join(p.workDir(j.ID), storedRecord))
	if err != nil {
		return reactor.Result{}, reactor.Fatal(fmt.Errorf("stored version: %w (requeue the job from Storing)", err))
	}
	var v storage.Version
	if err := json.Unmarshal(data, &v); err != nil || v.ARK != ark {
		return reactor.Result{}, reactor.Fatal(fmt.Errorf("stored version %s: unreadable or not of %s (requeue the job from Storing)", storedRecord, ark))
	}
	rec := inventory.Record{ARK: ark, Profile: prof.Name, LocalIDs: j.Identifiers.LocalIDs, Version: v.Number,
		Created: v.Created, Batch: j.BatchID, Job: j.ID}
	if md := j.Metadata; md != nil {
		rec.Who, rec.What, rec.When, rec.Where = md.Who, md.What, md.When, md.Where
	}
	for _, f := range v.Files {
		rec.Files = append(rec.Files, inventory.FileRow{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
	}
	err = p.underLock(ctx, ark, p.q.LockInventory, p.q.UnlockInventory, func() error {
		return p.inventoryFor(prof).Record(ctx, rec)
	})
	if err != nil {
		if errors.Is(err, inventory.ErrConflict) || inventory.Refused(err) {
			return reactor.Result{}, reactor.Fatal(err)
		}
		return reactor.Result{}, err
	}
	return reactor.Result{Attrs: map[string]any{"ark": ark, "version": v.Number}}, nil
}

// underLock runs fn holding a per-object lock; a lock held elsewhere is a
// retryable error (another job is storing or recording the same object).
func (p *Pipeline) underLock(ctx context.Context, ark string, lock, unlock func(context.Context, string) (bool, error), fn func() error) error {
	ok, err := lock(ctx, ark)
	if err != nil {
		return fmt.Errorf("lock of %s: %w", ark, err)
	}
	if !ok {
		return fmt.Errorf("%s is locked by another job; will retry", ark)
	}
	defer func() {
		// Unlocked even when ctx ended: the lock must not outlive the step.
		if _, err := unlock(context.WithoutCancel(ctx), ark); err != nil {
			p.log.Warn("unlock failed (the lock goes with the session)", "ark", ark, "err", err)
		}
	}()
	return fn()
}

// identified is the profile and the ARK of a job past Processing.
func (p *Pipeline) identified(j *queue.Job) (*profile.Profile, string, error) {
	prof, err := p.profile(j.Profile())
	if err != nil {
		return nil, "", err
	}
	if j.Identifiers == nil || j.Identifiers.PrimaryID == "" {
		return nil, "", reactor.Fatal(errors.New("no primary identifier (requeue the job from Processing)"))
	}
	return prof, j.Identifiers.PrimaryID, nil
}
