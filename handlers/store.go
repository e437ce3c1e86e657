package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// storeObject hands the object to storage under the object's storage lock.
// Storage makes a new version only when the content changed, the files
// describing the deposit aside, so a job stored twice (a crash after
// storing, before the transition; a crash mid-commit whose version the
// next Put completes) keeps one version. The version is kept in the
// working folder for Recording.
func (p *Pipeline) storeObject(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, ark, err := p.identified(j)
	if err != nil {
		return reactor.Result{}, err
	}
	work := p.workDir(j)
	entries, err := readStorageManifest(filepath.Join(work, storageManifest))
	if err != nil {
		return reactor.Result{}, reactor.Fatal(fmt.Errorf("storage manifest: %w: %s", err, redoAdvice(j, work)))
	}
	msg, err := p.depositOf(ctx, j)
	if err != nil {
		return reactor.Result{}, err
	}
	obj := storage.Object{ARK: ark, LocalIDs: j.Identifiers.LocalIDs, Files: p.storageFiles(j, work, entries),
		Fence: p.storageFence(ark), Describing: depositFiles, Message: msg}
	var kept storedVersion
	err = p.underLock(ctx, "storage", ark, j.ID, func() error {
		// Read under the lock: no version is stored meanwhile, and the
		// inventory records none that storage does not have yet.
		s.Doing(inventoryName(prof))
		known, err := p.recordedLatest(ctx, prof, ark)
		if err != nil {
			return err
		}
		if known.Version > 0 {
			if err := ownObject(ark, known, prof); err != nil {
				return err
			}
		}
		// Processing's rule again, at the version each target would write
		// now: another deposit of the object may have made its number
		// longer since (v9, v10), and a Put refusing a replica's key would
		// come after the primary's version was written.
		if err := p.checkFits(ctx, s, prof, ark, entries); err != nil {
			return err
		}
		kept, err = p.copyObject(ctx, s, prof, obj, known)
		return err
	})
	if res, waiting := p.waitWhileObjectHeld(ctx, s, err); waiting {
		return res, nil
	}
	if err != nil {
		if storage.Refused(err) || tooLong(err) != nil {
			return reactor.Result{}, reactor.Fatal(err)
		}
		return reactor.Result{}, err
	}
	var evs []inventory.Event
	for i, c := range kept.Copies {
		evs = append(evs,
			p.event(j.ID, inventory.EventReplication, "", c.Target, fmt.Sprintf("copy %d of %d: version %d at %s", i+1, len(kept.Copies), c.Number, redact.Location(c.URL))),
			p.event(j.ID, inventory.EventFixityCheck, "", c.Target, fixityDetail(c)))
	}
	if _, err := p.logEvents(j, evs...); err != nil {
		return reactor.Result{}, err
	}
	data, _ := json.Marshal(kept)
	if err := durable.WriteFile(filepath.Join(work, storedRecord), data); err != nil {
		return reactor.Result{}, err
	}
	// Both manifests are served from the working folder (until Notify
	// removes it) to whoever works the next step; the store node lists
	// where the version's copies stay.
	key, err := readHandoffKey(work)
	if err != nil {
		return reactor.Result{}, err
	}
	mode := ""
	if j.Store != nil {
		mode = j.Store.Mode
	}
	stored := queue.StepManifest{ManifestURL: p.inventoryManifestURL(j, key), Mode: mode}
	withCopies := queue.StepManifest{ManifestURL: p.storeManifestURL(j, key), Mode: mode}
	for _, c := range kept.Copies {
		withCopies.Copies = append(withCopies.Copies, c.URL)
	}
	return reactor.Result{
		Change: queue.JobChange{Store: &withCopies, Inventory: &stored},
		Attrs:  map[string]any{"ark": ark, "version": kept.Number, "changed": kept.Changed, "copies": len(kept.Copies)},
	}, nil
}

// depositMessage is the message of the version a job stores. It names the
// deposit (the job's creation time, created, tells a jid used again after a
// new queue apart), so that the job stored again, on any host, finds its
// own version even when another deposit's came after it (ocfl.Store.Put).
func depositMessage(j *queue.Job, created time.Time) string {
	return fmt.Sprintf(depositMessagePrefix+"%s of batch %s, created %s", j.ID, j.BatchID, depositCreated(created))
}

// depositCreated is a job's creation time as its depositMessage names it.
func depositCreated(created time.Time) string { return created.UTC().Format(time.RFC3339Nano) }

// depositOf is the depositMessage of job j, its creation time read from
// ZooKeeper when j is a view handed on from step to step here.
func (p *Pipeline) depositOf(ctx context.Context, j *queue.Job) (string, error) {
	created := j.Created
	if created.IsZero() {
		var err error
		if created, err = p.q.JobCreated(ctx, j.ID); err != nil {
			return "", err
		}
	}
	return depositMessage(j, created), nil
}

// depositMessagePrefix begins every depositMessage.
const depositMessagePrefix = "ingestq: job "

// namesADeposit tells whether a version's message is a depositMessage:
// storage's default, an import's, a service's own or none name no deposit.
func namesADeposit(msg string) bool { return strings.HasPrefix(msg, depositMessagePrefix) }

// namedDeposit is what a depositMessage names.
type namedDeposit struct{ Job, Batch, Created string }

// depositIn is the deposit version v's message names: ok is false for a
// message that names none (namesADeposit), err for one that begins as a
// depositMessage and does not go on as one.
func depositIn(v storage.Version) (d namedDeposit, ok bool, err error) {
	rest, ok := strings.CutPrefix(v.Message, depositMessagePrefix)
	if !ok {
		return d, false, nil
	}
	job, rest, ok1 := strings.Cut(rest, " of batch ")
	batch, created, ok2 := strings.Cut(rest, ", created ")
	if !ok1 || !ok2 || job == "" || batch == "" {
		return d, true, fmt.Errorf("version %d's message %q names no job and batch as ingestq writes them", v.Number, v.Message)
	}
	return namedDeposit{Job: job, Batch: batch, Created: created}, true, nil
}

// storageFiles are the files of the storage manifest, each vouched for
// (storage.File.Linkable) while it is still the file whose digest the
// record holds: a store on the same file system may then take it by a hard
// link, where any other file is copied and its digest checked on the way.
// Nothing in the pipeline writes into a working file once it is there
// (downloads, extractions and system files are put in place by a rename or
// as new files), so a link shares bytes that no step changes.
func (p *Pipeline) storageFiles(j *queue.Job, work string, entries []manifestEntry) []storage.File {
	rec := p.digestsOf(j.ID, work)
	files := make([]storage.File, len(entries))
	for i, e := range entries {
		files[i] = storage.File{Name: e.Name, Path: e.Path, Size: e.Size, SHA256: e.SHA256}
		if e.Path != filepath.Join(work, filepath.FromSlash(e.Name)) {
			continue
		}
		// Lstat: a symlink put in the file's place is not the file (a link
		// to it would store the symlink).
		if fi, err := os.Lstat(e.Path); err == nil {
			sum, ok := rec.unchanged(e.Name, fi)
			files[i].Linkable = ok && sum == e.SHA256 && fi.Size() == e.Size
		}
	}
	return files
}

// storedVersion is what Storing keeps in the working folder for Recording:
// the primary's version, and every verified copy.
type storedVersion struct {
	storage.Version
	// Made says that this deposit made the primary's version: its Put did,
	// on this try or an earlier one, whose version's message names the
	// deposit (decision 239). False when the version was there before (an
	// unchanged re-deposit), or when a store that keeps no message found
	// it already there.
	Made   bool         `json:"made,omitempty"`
	Copies []storedCopy `json:"copies,omitempty"`
}

// storedCopy is one verified copy of a version.
type storedCopy struct {
	Target   string    `json:"target"` // as the profile or --storage names it
	URL      string    `json:"url"`
	Number   int       `json:"number"` // its version number there
	Changed  bool      `json:"changed"`
	Verified time.Time `json:"verified"`
	Linked   int       `json:"-"` // files taken by a hard link, not copied
}

// fixityDetail says how a copy was verified: by its store, which hashed
// what it wrote, or for files it took by a hard link, by being the very
// files hashed while they were written and unchanged since.
func fixityDetail(c storedCopy) string {
	if c.Linked == 0 {
		return fmt.Sprintf("copy at %s verified by its store (sha256 of every file)", redact.Location(c.URL))
	}
	return fmt.Sprintf("copy at %s: %d new files are hard links to the working files whose sha256 was computed while they were written "+
		"(unchanged since: same inode, size and modification time), the others verified by its store (sha256)", redact.Location(c.URL), c.Linked)
}

// copyObject puts obj into every target, the primary first. Each Put is
// idempotent by content, so a step run again (a replica was down) writes
// only the copies still missing. Every target verifies what it writes. Each
// new version's files are counted stored once per copy written. Only the
// primary may take files by hard link: a replica linked to the same files
// would be the primary's bytes again, not a second copy of them.
// Nothing is written unless every target holds what known, the
// inventory's latest version of the object, says it does (heads), and
// the inventory records the primary's head or it is this deposit's own
// (pastRecord).
func (p *Pipeline) copyObject(ctx context.Context, s *reactor.Step, prof *profile.Profile, obj storage.Object, known inventory.Record) (storedVersion, error) {
	targets := p.targets(prof)
	var out storedVersion
	var size int64
	for _, f := range obj.Files {
		size += f.Size
	}
	copied := obj
	copied.Files = slices.Clone(obj.Files)
	for i := range copied.Files {
		copied.Files[i].Linkable = false
	}
	heads, err := p.heads(ctx, s, targets, obj, known)
	if err != nil {
		return out, err
	}
	if err := p.pastRecord(ctx, s, prof, targets[0], known, heads[0], obj); err != nil {
		return out, err
	}
	for i, t := range targets {
		s.Doing(storageName(t))
		st, err := p.store(ctx, t)
		if err != nil {
			return out, p.storageOut(t, err)
		}
		if i == 1 {
			obj = copied
		}
		v, err := putUnlessSame(ctx, st, obj, heads[i])
		if err != nil {
			return out, p.storageOut(t, fmt.Errorf("%s: %w", copyAt(i, targets), err))
		}
		if v.Changed {
			s.Transferred(reactor.Stored, size)
		}
		if i == 0 {
			out.Version, out.Made = v, v.Changed || obj.Message != "" && v.Message == obj.Message
		} else if v.Number != out.Number {
			p.log.Warn("storing: a replica numbers the version differently (it lacks earlier versions)",
				"ark", obj.ARK, "primary", out.Number, "replica", t, "number", v.Number)
		}
		out.Copies = append(out.Copies, storedCopy{Target: t, URL: v.URL, Number: v.Number, Changed: v.Changed, Verified: p.q.Now().UTC(), Linked: v.Linked})
	}
	return out, nil
}

// record writes the stored version to the inventory, under the object's
// inventory lock. Recording the same version again changes nothing. A
// deposit that changed nothing (the version is an earlier deposit's, and
// recorded) adds no events of its own to that version: it ingested
// nothing. Only the copies it wrote, a replica that lacked the version,
// are recorded, with their replication and fixity check; the job's
// inventory node says it was unchanged, and which version holds it.
func (p *Pipeline) record(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, ark, err := p.identified(j)
	if err != nil {
		return reactor.Result{}, err
	}
	data, err := os.ReadFile(filepath.Join(p.workDir(j), storedRecord))
	if err != nil {
		return reactor.Result{}, reactor.Fatal(fmt.Errorf("stored version: %w (requeue the job from Storing)", err))
	}
	var kept storedVersion
	if err := json.Unmarshal(data, &kept); err != nil || kept.ARK != ark {
		return reactor.Result{}, reactor.Fatal(fmt.Errorf("stored version %s: unreadable or not of %s (requeue the job from Storing)", storedRecord, ark))
	}
	rec := inventory.Record{ARK: ark, Profile: prof.Name, LocalIDs: j.Identifiers.LocalIDs, Version: kept.Number,
		Created: kept.Created, Batch: j.BatchID, Job: j.ID}
	if md := j.Metadata; md != nil {
		rec.Who, rec.What, rec.When, rec.Where = md.Who, md.What, md.When, md.Where
	}
	for _, f := range kept.Files {
		rec.Files = append(rec.Files, inventory.FileRow{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
	}
	var before inventory.Record // the version as an earlier deposit recorded it
	var unchanged bool
	err = p.underLock(ctx, "inventory", ark, j.ID, func() error {
		s.Doing(inventoryName(prof))
		inv, err := p.inventoryFor(ctx, prof)
		if err == nil {
			before, unchanged, err = recordedBefore(ctx, inv, j, kept)
		}
		if err != nil {
			return p.inventoryOut(prof, err)
		}
		if !unchanged {
			if err := p.underRecord(ctx, s, prof, inv, kept); err != nil {
				return err
			}
		}
		if err := p.preservation(j, kept, unchanged, &rec); err != nil {
			return err
		}
		return p.inventoryOut(prof, inv.Record(ctx, rec))
	})
	if res, waiting := p.waitWhileObjectHeld(ctx, s, err); waiting {
		return res, nil
	}
	if err != nil {
		if errors.Is(err, inventory.ErrConflict) || inventory.Refused(err) {
			return reactor.Result{}, reactor.Fatal(err)
		}
		return reactor.Result{}, err
	}
	res := reactor.Result{Attrs: map[string]any{"ark": ark, "version": kept.Number}}
	if unchanged {
		p.log.Info("recording: the deposit changed nothing; the version stays as its deposit recorded it",
			"job", j.ID, "ark", ark, "version", kept.Number, "recorded_by", before.Job, "batch", before.Batch)
		res.Attrs["unchanged"] = true
		var node queue.StepManifest
		if j.Inventory != nil {
			node = *j.Inventory
		} else {
			key, err := readHandoffKey(p.workDir(j))
			if err != nil {
				return reactor.Result{}, err
			}
			node.ManifestURL = p.inventoryManifestURL(j, key)
		}
		node.Unchanged, node.Version = true, kept.Number
		res.Change.Inventory = &node
	}
	return res, nil
}

// recordedBefore returns the inventory's record of the job's stored
// version, and true, when an earlier deposit made and recorded it: this
// deposit made no version (kept.Made is false, and so is Changed, which
// alone tells in a record an older binary wrote), the inventory has the
// version, and another deposit recorded it. A version message naming a
// deposit settles whose it is (Storing found it is not this one's); from a
// store that keeps no message, the record's job does. False: the version
// is this deposit's (a step run again after a crash), or the inventory
// lacks it, and this deposit's record is its first, a full one.
func recordedBefore(ctx context.Context, inv inventory.Inventory, j *queue.Job, kept storedVersion) (inventory.Record, bool, error) {
	if kept.Made || kept.Changed {
		return inventory.Record{}, false, nil
	}
	d, err := inv.Object(ctx, kept.ARK)
	if errors.Is(err, inventory.ErrNotFound) {
		return inventory.Record{}, false, nil
	}
	if err != nil {
		return inventory.Record{}, false, fmt.Errorf("inventory: is version %d of %s recorded: %w", kept.Number, kept.ARK, err)
	}
	i := slices.IndexFunc(d.Versions, func(r inventory.Record) bool { return r.Version == kept.Number })
	if i < 0 {
		return inventory.Record{}, false, nil
	}
	rec := d.Versions[i]
	if !namesADeposit(kept.Message) && rec.Job == j.ID && rec.Batch == j.BatchID {
		return inventory.Record{}, false, nil // its own record, from a try whose end was lost
	}
	return rec, true, nil
}

// preservation sets rec's replicas and events: for a deposit that made
// or first recorded its version, every verified copy and every event of
// the job with its ingestion; for one that changed nothing, only the
// copies it wrote (Changed: a replica lacked the version) with their
// replication and fixity check events.
func (p *Pipeline) preservation(j *queue.Job, kept storedVersion, unchanged bool, rec *inventory.Record) error {
	if !unchanged {
		for _, c := range kept.Copies {
			rec.Replicas = append(rec.Replicas, inventory.Replica{Target: c.Target, URL: c.URL, Verified: c.Verified})
		}
		var err error
		rec.Events, err = p.logEvents(j, p.event(j.ID, inventory.EventIngestion, "", "",
			fmt.Sprintf("version %d of %s from batch %s, job %s", kept.Number, rec.ARK, j.BatchID, j.ID)))
		return err
	}
	written := map[string]bool{}
	for _, c := range kept.Copies {
		if c.Changed {
			rec.Replicas = append(rec.Replicas, inventory.Replica{Target: c.Target, URL: c.URL, Verified: c.Verified})
			written[eventID(j.ID, inventory.EventReplication, "", c.Target)] = true
			written[eventID(j.ID, inventory.EventFixityCheck, "", c.Target)] = true
		}
	}
	all, err := p.logEvents(j)
	rec.Events = slices.DeleteFunc(all, func(e inventory.Event) bool { return !written[e.ID] })
	return err
}

// storageFence fails once this daemon no longer holds ark's storage lock:
// its session expired (a pause, a partition) and the lock went with it.
func (p *Pipeline) storageFence(ark string) func(context.Context) error {
	return func(ctx context.Context) error {
		ok, err := p.q.HoldsStorage(ctx, ark)
		if err != nil {
			return fmt.Errorf("storage lock of %s: %w", ark, err)
		}
		if !ok {
			return fmt.Errorf("the storage lock of %s is no longer this daemon's (its ZooKeeper session ended): "+
				"another job may be storing the object, so this one neither commits nor removes what it wrote", ark)
		}
		return nil
	}
}

// underLock runs fn holding ark's lock of what ("storage", "inventory")
// for job jid. A lock held elsewhere (another job storing or recording the
// object, or a program of Merritt's) is an errObjectHeld naming who holds it.
func (p *Pipeline) underLock(ctx context.Context, what, ark, jid string, fn func() error) error {
	lock, unlock, holder := p.q.LockStorage, p.q.UnlockStorage, p.q.StorageLock
	if what == "inventory" {
		lock, unlock, holder = p.q.LockInventory, p.q.UnlockInventory, p.q.InventoryLock
	}
	key := what + " " + ark
	if _, left := p.unreleased.LoadAndDelete(key); left {
		// This daemon's own lock, left by a step whose unlock found
		// ZooKeeper away: the session outlived the outage, and so did the
		// lock, which no step uses.
		if _, err := unlock(ctx, ark); err != nil {
			p.unreleased.Store(key, true)
			return fmt.Errorf("release of the %s lock of %s left by an earlier step: %w", what, ark, err)
		}
	}
	ok, err := lock(ctx, ark, jid)
	if err != nil {
		return fmt.Errorf("lock of %s: %w", ark, err)
	}
	if !ok {
		l, held, err := holder(ctx, ark)
		switch {
		case err != nil:
			return fmt.Errorf("the %s lock of %s is held elsewhere: %w", what, ark, err)
		case !held:
			return errObjectHeld{fmt.Sprintf("for the %s lock of %s, let go just as this job asked for it", what, ark)}
		}
		return p.lockedElsewhere(ctx, what, ark, l)
	}
	defer func() {
		// Unlocked even when ctx ended: the lock must not outlive the step.
		if _, err := unlock(context.WithoutCancel(ctx), ark); err != nil {
			if queue.Unreachable(err) {
				p.unreleased.Store(key, true) // for the next step on the object here, if the session lives on
			}
			p.log.Warn("unlock failed, ZooKeeper out of reach for longer than an unlock waits; the lock is freed at this daemon's next step on the object, or goes with its session", "lock", what, "ark", ark, "err", err)
		}
	}()
	return fn()
}

// identified is the profile and the ARK of a job past Processing.
func (p *Pipeline) identified(j *queue.Job) (*profile.Profile, string, error) {
	prof, err := p.jobProfile(j)
	if err != nil {
		return nil, "", err
	}
	switch {
	case j.Identifiers != nil && j.Identifiers.PrimaryID != "":
		return prof, j.Identifiers.PrimaryID, nil
	case j.State() == queue.Notify:
		// Notify runs no earlier step again (adopting), so redoAdvice's
		// requeue would fail the job again with the same words.
		return nil, "", reactor.Fatal(fmt.Errorf("no primary identifier at Notify: the object is stored and recorded, but the job no longer "+
			"names its ARK, and a requeue runs Notify alone: find the object by a local id its depositor gave (`ingestq object --profile %s LOCALID`), "+
			"tell the depositor its ARK, then `ingestq delete %s`", prof.Name, j.ID))
	}
	return nil, "", reactor.Fatal(fmt.Errorf("no primary identifier past Processing: %s", redoAdvice(j, p.workDir(j))))
}

// redoAdvice says how an operator has job j's earlier steps run again when
// what Processing left is unusable: a requeue alone resumes at the step
// that failed and reads it again, while a job whose working folder is gone
// runs its steps from Downloading again at its next step (adopting).
func redoAdvice(j *queue.Job, work string) string {
	return fmt.Sprintf("to run Processing again, remove the job's working folder %s, then `ingestq requeue %s` "+
		"(its steps from Downloading run again)", work, j.ID)
}

// heads asks each target for its head version of obj (nil: it has none)
// and refuses them all, before any is written, when one lacks a version
// the inventory records there (lacking).
func (p *Pipeline) heads(ctx context.Context, s *reactor.Step, targets []string, obj storage.Object, known inventory.Record) ([]*storage.Version, error) {
	heads := make([]*storage.Version, len(targets))
	for i, t := range targets {
		s.Doing(storageName(t))
		st, err := p.store(ctx, t)
		if err != nil {
			return nil, p.storageOut(t, err)
		}
		head, err := st.Latest(ctx, obj.ARK)
		if err == nil {
			heads[i] = &head
		} else if !errors.Is(err, storage.ErrNotFound) {
			return nil, p.storageOut(t, fmt.Errorf("%s: %w", copyAt(i, targets), err))
		}
		if err := lacking(s.Job.ID, i == 0, known, heads[i], t, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", copyAt(i, targets), err)
		}
	}
	return heads, nil
}

// recordedFiles are the files of an inventory record, as storage names them.
func recordedFiles(rec inventory.Record) []storage.File {
	files := make([]storage.File, len(rec.Files))
	for i, f := range rec.Files {
		files[i] = storage.File{Name: f.Name, Size: f.Size, SHA256: f.SHA256}
	}
	return files
}

// copyAt names copy i of targets in messages.
func copyAt(i int, targets []string) string {
	return fmt.Sprintf("copy %d of %d, at %s", i+1, len(targets), targets[i])
}

// putUnlessSame puts obj only when head, the target's head version (nil:
// none), holds other content: a job stored again (its first try cut after
// storing) then sends no bytes to a storage service. Put asks the same
// question itself, after completing a version a killed writer left, which
// Latest cannot see.
func putUnlessSame(ctx context.Context, st storage.Store, obj storage.Object, head *storage.Version) (storage.Version, error) {
	if head != nil && storage.Unchanged(head.Files, obj.Files, obj.Describing) {
		v := *head
		v.Changed = false
		return v, nil
	}
	return st.Put(ctx, obj)
}

// recordedLatest is the inventory's record of ark's latest version; none
// (a zero Record) for an object it does not know.
func (p *Pipeline) recordedLatest(ctx context.Context, prof *profile.Profile, ark string) (inventory.Record, error) {
	inv, err := p.inventoryFor(ctx, prof)
	if err == nil {
		var rec inventory.Record
		if rec, err = inv.Latest(ctx, ark); err == nil || errors.Is(err, inventory.ErrNotFound) {
			return rec, nil
		}
	}
	return inventory.Record{}, p.inventoryOut(prof, fmt.Errorf("inventory: latest version of %s, asked before storing it: %w", ark, err))
}

// lacking refuses, as Fatal, to write obj to target when the target lacks
// a version the inventory records there (storage restored from a backup
// older than the inventory): the write would make that version number again
// with other content, which no later restore could put right. The primary
// numbers versions as the inventory does, so its head (nil: no object) must
// be known's version or later (later: this job's own, stored before a crash
// cut the step, or a version stored and not recorded: pastRecord tells
// which may be written on). A replica may number
// differently (added to the profile after the object's first versions), so
// it is refused only when the inventory records known's copy there and its
// head is neither that copy (the same URL), nor numbered as late, nor this
// deposit's content (an earlier try's copy); nor when this deposit is
// known's content again and the replica's next version is known's number:
// the write is then the copy the replica lost, under its own number.
func lacking(jid string, primary bool, known inventory.Record, head *storage.Version, target string, obj storage.Object) error {
	if known.Version == 0 {
		return nil
	}
	i := slices.IndexFunc(known.Replicas, func(c inventory.Replica) bool { return c.Target == target })
	next := 1
	if head != nil {
		next = head.Number + 1
	}
	switch {
	case next > known.Version:
		return nil
	case primary: // behind the inventory: refused
	case i < 0:
		return nil
	case head != nil && (head.URL == known.Replicas[i].URL || storage.Unchanged(head.Files, obj.Files, obj.Describing)):
		return nil
	case next == known.Version && storage.Unchanged(recordedFiles(known), obj.Files, obj.Describing):
		return nil
	}
	has := "has no version of it"
	if head != nil {
		has = fmt.Sprintf("has version %d as its latest", head.Number)
	}
	return reactor.Fatal(fmt.Errorf("the inventory records version %d of %s, and this target %s (storage restored from a backup "+
		"older than the inventory?); nothing was written: restore the object from a replica target or the storage's backup "+
		"(see Backups and recovery in the README), then `ingestq requeue %s`", known.Version, obj.ARK, has, jid))
}
