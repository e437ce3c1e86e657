package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A primary holds versions past the inventory's latest in three cases: a
// job stored its version and has not recorded it yet (the storage and
// inventory locks are taken per step, so a second job of the object can
// reach Storing meanwhile), this job stored its own before a crash cut the
// step, or the inventory was restored from a backup older than storage and
// lost them. Only the last makes a version on top of them a hole in the
// object's record (decision 546), so Storing writes on top of a version
// the inventory lacks only when it is this deposit's own, waits while its
// job is between Storing and Recording, and otherwise fails the job,
// writing nothing; Recording records no version above unrecorded ones.

// pastRecord lets Storing write on top of the primary's head (target)
// when the inventory records it (known), or when it is this deposit's own
// (its version message; from a store that keeps none, its content). A
// head another job stored and has not recorded yet is an errObjectHeld,
// unless this deposit's own version is under it (ownUnder); any other is
// Fatal: the inventory lost it.
func (p *Pipeline) pastRecord(ctx context.Context, s *reactor.Step, prof *profile.Profile, target string, known inventory.Record,
	head *storage.Version, obj storage.Object) error {
	if head == nil || head.Number <= known.Version || head.Message == obj.Message ||
		head.Message == "" && storage.Unchanged(head.Files, obj.Files, obj.Describing) {
		return nil
	}
	whose, waitFor, err := p.whose(ctx, s.Job.ID, []storage.Version{*head})
	if err != nil {
		return err
	}
	span := versionSpan(known.Version+1, head.Number)
	if waitFor != "" {
		if redo, err := p.ownUnder(ctx, s, prof, target, known, head, obj, waitFor); redo || err != nil {
			return err
		}
		return errObjectHeld{fmt.Sprintf("for job %s to record %s of %s, at %s (this job's version goes on top of it): %s",
			waitFor, span, obj.ARK, target, strings.Join(whose, "; "))}
	}
	// A job that recorded since known was read, and left Recording before
	// whose read its state, is not one the inventory lost.
	now, err := p.recordedLatest(ctx, prof, obj.ARK)
	if err != nil || now.Version >= head.Number {
		return err
	}
	return reactor.Fatal(fmt.Errorf("the primary target %s holds %s of %s, which %s does not record (%s): %s; "+
		"writing on top would leave a hole in the object's record (inventory restored from a backup older than storage?); "+
		"nothing was written: %s", target, versionSpan(now.Version+1, head.Number), obj.ARK, inventoryName(prof),
		recordsUpTo(now.Version), strings.Join(whose, "; "), repairAdvice(obj.ARK, s.Job.ID)))
}

// ownUnder tells whether this deposit stored a version between known and
// the head, which job waitFor stored on top of it and has not recorded:
// two Storing steps of the object ran at once (a storage lock lost with its
// session). waitFor's Recording waits for that version to be recorded, so
// waiting for waitFor would be for ever. With this deposit's content it is
// a redo (true): Put finds the version by its message and content and
// writes nothing, and this job records it. With other content (the job run
// again from Downloading over changed files) it is Fatal, nothing written.
func (p *Pipeline) ownUnder(ctx context.Context, s *reactor.Step, prof *profile.Profile, target string, known inventory.Record,
	head *storage.Version, obj storage.Object, waitFor string) (redo bool, err error) {
	if obj.Message == "" || head.Number-1 <= known.Version {
		return false, nil
	}
	between, err := p.versionsBetween(ctx, target, obj.ARK, known.Version+1, head.Number-1)
	if err != nil {
		return false, err
	}
	own := func(v storage.Version) bool { return v.Message == obj.Message }
	if slices.ContainsFunc(between, func(v storage.Version) bool {
		return own(v) && storage.Unchanged(v.Files, obj.Files, obj.Describing)
	}) {
		return true, nil
	}
	i := slices.IndexFunc(between, own)
	if i < 0 {
		return false, nil
	}
	return false, reactor.Fatal(fmt.Errorf("the primary target %s holds version %d of %s, stored by this job on an earlier run of its "+
		"steps with other content, which %s does not record (%s), and version %d on top of it, stored by job %s, whose Recording "+
		"waits for it to be recorded; nothing was written: %s", target, between[i].Number, obj.ARK, inventoryName(prof),
		recordsUpTo(known.Version), head.Number, waitFor, repairAdvice(obj.ARK, s.Job.ID)))
}

// underRecord refuses Recording's version kept while the inventory (inv,
// read under the object's inventory lock) lacks a version under it: the
// primary's versions between the inventory's latest and kept are other
// jobs', and recording kept would leave a hole. One whose job is between
// Storing and Recording is an errObjectHeld; any other is Fatal.
func (p *Pipeline) underRecord(ctx context.Context, s *reactor.Step, prof *profile.Profile, inv inventory.Inventory, kept storedVersion) error {
	latest, err := inv.Latest(ctx, kept.ARK)
	if err != nil && !errors.Is(err, inventory.ErrNotFound) {
		return p.inventoryOut(prof, fmt.Errorf("inventory: latest version of %s, asked before recording version %d: %w", kept.ARK, kept.Number, err))
	}
	if kept.Number <= latest.Version+1 {
		return nil
	}
	target := p.targets(prof)[0]
	between, err := p.versionsBetween(ctx, target, kept.ARK, latest.Version+1, kept.Number-1)
	if err != nil {
		return err
	}
	whose, waitFor, err := p.whose(ctx, s.Job.ID, between)
	if err != nil {
		return err
	}
	span := versionSpan(latest.Version+1, kept.Number-1)
	if waitFor != "" {
		return errObjectHeld{fmt.Sprintf("for job %s to record %s of %s, under this job's version %d: %s",
			waitFor, span, kept.ARK, kept.Number, strings.Join(whose, "; "))}
	}
	return reactor.Fatal(fmt.Errorf("version %d of %s is this job's, and %s does not record %s under it (%s), which the primary "+
		"target %s holds: %s; recording version %d would leave a hole in the object's record (inventory restored from a backup "+
		"older than storage?); nothing was recorded: %s", kept.Number, kept.ARK, inventoryName(prof), span, recordsUpTo(latest.Version),
		target, strings.Join(whose, "; "), kept.Number, repairAdvice(kept.ARK, s.Job.ID)))
}

// versionsBetween are versions from to to of ark at target, with their
// messages where the target can say them (a Surveyor); else numbered
// alone, whose then names no job.
func (p *Pipeline) versionsBetween(ctx context.Context, target, ark string, from, to int) ([]storage.Version, error) {
	var out []storage.Version
	for n := from; n <= to; n++ {
		out = append(out, storage.Version{ARK: ark, Number: n})
	}
	st, err := p.store(ctx, target)
	if err != nil {
		return nil, p.storageOut(target, err)
	}
	sv, ok := st.(storage.Surveyor)
	if !ok {
		return out, nil
	}
	stored, err := sv.Survey(ctx, ark)
	if errors.Is(err, storage.ErrLatestOnly) {
		return out, nil
	}
	if err != nil {
		return nil, p.storageOut(target, fmt.Errorf("the versions of %s under the one recorded: %w", ark, err))
	}
	for _, v := range stored.Versions() {
		if v.Number >= from && v.Number <= to {
			out[v.Number-from] = v
		}
	}
	return out, nil
}

// whose says, for each version, which deposit stored it and where its job
// is now; waitFor is a job among them between Storing and Recording (its
// version is in flight), "" when none is. A version whose message names no
// ingestq deposit (an import's, another program's, or a store that keeps
// none), a job the queue no longer has (deleted, or its number taken by
// a later job of a new queue), or the step's own job, self, is no job's in
// flight: a job waiting for itself would wait for ever.
func (p *Pipeline) whose(ctx context.Context, self string, versions []storage.Version) (whose []string, waitFor string, err error) {
	for _, v := range versions {
		d, ok, perr := depositIn(v)
		var says string
		switch {
		case perr != nil:
			says = perr.Error()
		case !ok && v.Message == "":
			says = "its message names no deposit"
		case !ok:
			says = fmt.Sprintf("its message %q names no ingestq deposit", v.Message)
		default:
			var inFlight bool
			if says, inFlight, err = p.depositNow(ctx, self, d); err != nil {
				return nil, "", err
			}
			if inFlight {
				waitFor = d.Job
			}
		}
		whose = append(whose, fmt.Sprintf("version %d: %s", v.Number, says))
	}
	return whose, waitFor, nil
}

// depositNow says where the job that deposit d names is in the queue, and
// whether it is between Storing and Recording and not self, the step's own
// job (a version of an earlier run of its steps, before it was run again
// from Downloading over changed files).
func (p *Pipeline) depositNow(ctx context.Context, self string, d namedDeposit) (says string, inFlight bool, err error) {
	who := fmt.Sprintf("stored by job %s of batch %s", d.Job, d.Batch)
	st, _, err := p.q.JobStatusOf(ctx, d.Job)
	if errors.Is(err, queue.ErrNotFound) {
		return who + ", no longer in the queue", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("state of job %s, which stored a version the inventory does not record: %w", d.Job, err)
	}
	created, err := p.q.JobCreated(ctx, d.Job)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return who + ", no longer in the queue", false, nil
	case err != nil:
		return "", false, fmt.Errorf("job %s, which stored a version the inventory does not record: %w", d.Job, err)
	case depositCreated(created) != d.Created:
		return fmt.Sprintf("%s, created %s: the queue's job %s now is another, created %s", who, d.Created, d.Job,
			depositCreated(created)), false, nil
	case d.Job == self:
		return fmt.Sprintf("stored by this job (batch %s) on an earlier run of its steps, with other content, and not recorded", d.Batch), false, nil
	}
	switch st.Status {
	case queue.Storing, queue.Recording:
		return fmt.Sprintf("%s, now at %s, which has not recorded it yet", who, st.Status), true, nil
	}
	return fmt.Sprintf("%s, now %s", who, st.Status), false, nil
}

// repairAdvice says how an operator records from storage what the
// inventory lost of ark, then has job jid go on.
func repairAdvice(ark, jid string) string {
	return fmt.Sprintf("hold the queue (`ingestq hold queue`), record them from storage (`ingestq audit --repair %s`), "+
		"release it (`ingestq release queue`), then `ingestq requeue %s` (see Backups and recovery in the README)", ark, jid)
}

// versionSpan names versions from to to: "version 3", "versions 2 to 4".
func versionSpan(from, to int) string {
	if from == to {
		return fmt.Sprintf("version %d", from)
	}
	return fmt.Sprintf("versions %d to %d", from, to)
}

// recordsUpTo says what the inventory records of an object, by its
// latest version n.
func recordsUpTo(n int) string {
	if n == 0 {
		return "it records no version of it"
	}
	return fmt.Sprintf("it records up to version %d", n)
}
