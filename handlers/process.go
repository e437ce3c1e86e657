package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// process gives the object its identifier, writes its system files and the
// storage manifest. The identifier comes from the inventory when one of the
// job's local ids is already an object there (this deposit is an update of
// it), else from the depositor, else from the minter, whose record of the
// job gives a re-run the same identifier back; it is written to the job
// with the step's transition (decision 214).
func (p *Pipeline) process(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, err := p.jobProfile(j)
	if err != nil {
		return reactor.Result{}, err
	}
	ids, update, err := p.identify(ctx, s, prof)
	if err != nil {
		return reactor.Result{}, err
	}
	work := p.workDir(j)
	rec := p.digestsOf(j.ID, work)
	if err := writeSystemFiles(work, rec, j, ids); err != nil {
		return reactor.Result{}, err
	}
	entries, rec, err := p.objectFiles(ctx, s, work, rec)
	if err != nil {
		return reactor.Result{}, err
	}
	if entries, err = p.writePremis(ctx, j, rec, ids, update, entries); err != nil {
		return reactor.Result{}, err
	}
	if !slices.ContainsFunc(entries, func(e manifestEntry) bool { return filepath.Dir(e.Name) != systemDir }) {
		return reactor.Result{}, reactor.Fatal(errors.New("the object has no files"))
	}
	if entries, err = writeObjectManifest(work, rec, entries); err != nil {
		return reactor.Result{}, err
	}
	if err := p.checkFits(ctx, s, prof, ids.PrimaryID, entries); err != nil {
		return reactor.Result{}, err
	}
	// The key before the manifest: a folder with a manifest and no key is
	// one a release before keys handed on.
	key, err := makeHandoffKey(work)
	if err != nil {
		return reactor.Result{}, err
	}
	// Storing reads the record to know which files are still the ones
	// hashed, and the storage manifest: both written at once.
	var g errgroup.Group
	g.Go(func() error { return rec.write(work) })
	g.Go(func() error { return writeStorageManifest(filepath.Join(work, storageManifest), entries) })
	if err := g.Wait(); err != nil {
		return reactor.Result{}, err
	}
	mode := "add"
	if update {
		mode = "update"
	}
	change := queue.JobChange{Store: &queue.StepManifest{ManifestURL: p.storeManifestURL(j, key), Mode: mode},
		Message: nameNote(entryNames(entries))}
	if j.Identifiers == nil || j.Identifiers.PrimaryID != ids.PrimaryID {
		change.Identifiers = ids
	}
	return reactor.Result{
		Change: change,
		Attrs:  map[string]any{"ark": ids.PrimaryID, "mode": mode, "files": len(entries)},
	}, nil
}

// identify settles the job's primary identifier. update tells that a local
// id named an existing object.
func (p *Pipeline) identify(ctx context.Context, s *reactor.Step, prof *profile.Profile) (*queue.Identifiers, bool, error) {
	j := s.Job
	ids := &queue.Identifiers{}
	if j.Identifiers != nil {
		*ids = *j.Identifiers
		ids.LocalIDs = slices.Clone(ids.LocalIDs)
	}
	given := ids.PrimaryID
	var found string
	s.Doing(inventoryName(prof))
	inv, err := p.inventoryFor(ctx, prof)
	if err != nil {
		return nil, false, p.inventoryOut(prof, err)
	}
	for _, lid := range ids.LocalIDs {
		ark, ok, err := inv.LookupLocalID(ctx, prof.Name, lid)
		if err != nil {
			return nil, false, p.inventoryOut(prof, fmt.Errorf("local id %q: inventory lookup: %w", lid, err))
		}
		if !ok {
			continue
		}
		if found != "" && ark != found {
			return nil, false, reactor.Fatal(fmt.Errorf("local ids name two objects: %s and %s", found, ark))
		}
		found = ark
		if given != "" && given != ark {
			return nil, false, reactor.Fatal(fmt.Errorf("identifier mismatch: the depositor gave %s, but local id %q is %s in the inventory", given, lid, ark))
		}
	}
	switch {
	case found != "":
		ids.PrimaryID = found
	case given != "":
		if err := p.givenOwn(ctx, inv, prof, given); err != nil {
			return nil, false, err
		}
	case ids.PrimaryID == "":
		ark, err := p.mintUnused(ctx, j, prof, inv)
		if err != nil {
			return nil, false, err
		}
		ids.PrimaryID = ark
	}
	return ids, found != "", nil
}

// manifestEntry is one file of the object, as the storage manifest lists it.
type manifestEntry struct {
	Name   string // producer/… or system/…
	Path   string
	Size   int64
	SHA256 string
}

// hashParallel bounds the files hashTree hashes at once: enough to keep
// every core busy and to overlap one file's read with another's hashing.
const hashParallel = 8

// objectFiles lists the object's files with their SHA-256 digests, as the
// digest record has them. A depositor's file that is missing, or whose
// bytes no longer have the digest its verified download recorded, was
// changed in the working folder: it is removed and the download is run
// again in place (fetching only what is not there, checked against the
// depositor's digest), once. The record comes back as it is then.
func (p *Pipeline) objectFiles(ctx context.Context, s *reactor.Step, work string, rec *digests) ([]manifestEntry, *digests, error) {
	entries, changed, err := hashTree(work, rec, producerDir, systemDir)
	if err != nil || len(changed) == 0 {
		return entries, rec, err
	}
	p.log.Warn("processing: files changed since their verified download; fetching them again",
		"job", s.Job.ID, "files", changed)
	for _, name := range changed {
		if err := os.Remove(filepath.Join(work, filepath.FromSlash(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	if _, err := p.download(ctx, s); err != nil {
		return nil, nil, fmt.Errorf("fetching changed files again: %w", err)
	}
	rec = p.digestsOf(s.Job.ID, work)
	entries, changed, err = hashTree(work, rec, producerDir, systemDir)
	if err == nil && len(changed) > 0 {
		err = reactor.Fatal(fmt.Errorf("%v changed in the working folder again after they were fetched again", changed))
	}
	return entries, rec, err
}

// hashTree lists the regular files under the given folders of root, in
// name order, each with its SHA-256: the recorded one while the file is
// still the one that was hashed, else hashed now and recorded. A symlink or
// other special file is refused. changed lists the depositor's files
// (under producer/) that the record has with other bytes, or that are gone.
func hashTree(root string, rec *digests, dirs ...string) (out []manifestEntry, changed []string, err error) {
	var infos []fs.FileInfo // of out's files, as the walk found them
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if !de.Type().IsRegular() {
				return reactor.Fatal(fmt.Errorf("%s: not a regular file", filepath.ToSlash(rel)))
			}
			fi, err := de.Info()
			if err != nil {
				return err
			}
			out = append(out, manifestEntry{Name: filepath.ToSlash(rel), Path: path, Size: fi.Size()})
			infos = append(infos, fi)
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(context.Background())
	g.SetLimit(hashParallel)
	for i := range out {
		e := &out[i] // each goroutine fills its own entry
		if sum, ok := rec.unchanged(e.Name, infos[i]); ok {
			e.SHA256 = sum
			continue
		}
		g.Go(func() (err error) {
			if gctx.Err() != nil {
				return nil // another file failed: the step fails anyway
			}
			if e.SHA256, e.Size, err = sha256File(e.Path); err != nil {
				return err
			}
			if was, ok := rec.lookup(e.Name); ok && was.SHA256 != e.SHA256 && strings.HasPrefix(e.Name, producerDir+"/") {
				mu.Lock()
				changed = append(changed, e.Name)
				mu.Unlock()
				return nil
			}
			rec.addInfo(e.Name, e.SHA256, infos[i])
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	changed = append(changed, missing(out, rec.names(producerDir))...)
	slices.Sort(changed)
	slices.SortFunc(out, func(a, b manifestEntry) int { return cmpString(a.Name, b.Name) })
	return out, changed, nil
}

func entryNames(entries []manifestEntry) []string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return names
}

// missing are the recorded names that no entry has.
func missing(entries []manifestEntry, recorded []string) []string {
	have := make(map[string]bool, len(entries))
	for _, e := range entries {
		have[e.Name] = true
	}
	return slices.DeleteFunc(recorded, func(n string) bool { return have[n] })
}

func sha256File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func fileURL(path string) string { return "file://" + filepath.ToSlash(path) }

// writePremis logs the events of Processing (how the object got its ARK,
// the digest of each of its files) and writes the object's PREMIS file
// with every event so far, adding it to entries in place of one an
// earlier run wrote.
func (p *Pipeline) writePremis(ctx context.Context, j *queue.Job, rec *digests, ids *queue.Identifiers, update bool, entries []manifestEntry) ([]manifestEntry, error) {
	how := "given by the depositor"
	switch minted, ok, err := p.q.Minted(ctx, j.ID); {
	case err != nil:
		return nil, err
	case update:
		how = "the object of local id " + strings.Join(ids.LocalIDs, ";") + " in the inventory"
	case ok && minted == ids.PrimaryID:
		how = "minted"
	}
	evs := []inventory.Event{p.event(j.ID, inventory.EventIdentifierAssignment, "", "", ids.PrimaryID+": "+how)}
	name := path.Join(systemDir, premisFile)
	entries = slices.DeleteFunc(entries, func(e manifestEntry) bool { return slices.Contains(depositFiles, e.Name) })
	for _, e := range entries {
		evs = append(evs, p.event(j.ID, inventory.EventMessageDigestCalculation, e.Name, "", "sha256 "+e.SHA256))
	}
	all, err := p.logEvents(j, evs...)
	if err != nil {
		return nil, err
	}
	e, err := rec.writeHashed(p.workDir(j), name, premisXML(ids.PrimaryID, p.cfg.Agent, all))
	if err != nil {
		return nil, err
	}
	return append(entries, e), nil
}

// maxMintSkips bounds the ARKs one mint passes over: past it the counter is
// so far behind the storage that an operator should look (decision 255).
const maxMintSkips = 10_000

// maxMintGap bounds how far past an unused ARK a mint looks for an object
// the inventory records on the same counter. One there means the counter is
// behind (ZooKeeper restored from an older snapshot): the unused ARKs before
// it were minted in the period lost, for jobs that failed before storing,
// and the walk goes on past them to the ARKs of the jobs that stored. ARKs
// of the shoulder further apart (imported, or given by depositors) are not
// walked to.
const maxMintGap = 1_000

// recordedPastPage is how many of the inventory's objects after an unused
// ARK are read to find the next one of its counter: other ARKs that begin
// as the counter's do (a depositor's) may sort between.
const recordedPastPage = 4

// mintUnused mints job j's ARK, passing over any that already names an
// object in the profile's inventory or its primary storage. The counter
// lives in ZooKeeper: a queue made anew over kept storage and inventory (a
// ZooKeeper data folder thrown away) starts it again, and its first ARKs
// would make an unrelated deposit the next version of an object already
// stored. Each ARK passed over stays used (the counter never goes back), so
// it is passed over once.
//
// A ZooKeeper restored from an older snapshot brings back jobs that had
// stored their objects, without their ARKs, and the counter as it was. An
// ARK whose stored version this very deposit made (its version message) is
// the job's own: taken, so storing it again makes no new version and no
// second object. One passed over that another job of the queue stored is
// given back to that job. An unused one is passed over too when the
// inventory records an object minted after it (within maxMintGap), so that
// an ARK whose job failed before storing does not end the walk before the
// ARKs of the jobs after it. An ARK the job had minted before this call (a
// step run again) is not passed over for that: objects minted after it may
// be recorded by now. One walk at a time in a daemon, so that a job given
// its ARK has it before it mints.
func (p *Pipeline) mintUnused(ctx context.Context, j *queue.Job, prof *profile.Profile, inv inventory.Inventory) (string, error) {
	own, err := p.depositOf(ctx, j)
	if err != nil {
		return "", err
	}
	p.minting.Lock()
	defer p.minting.Unlock()
	_, minted, err := p.q.Minted(ctx, j.ID)
	if err != nil {
		return "", fmt.Errorf("minting: %w", err)
	}
	unused := 0 // ARKs passed over with nothing under them
	for skipped := 0; ; skipped++ {
		ark, err := p.minter.Mint(ctx, j.ID, prof.NAAN, prof.Shoulder)
		if err != nil {
			return "", fmt.Errorf("minting: %w", err)
		}
		used, made, err := p.arkInUse(ctx, prof, inv, ark)
		if err != nil {
			return "", err
		}
		if made == own {
			p.log.Warn("minting: this job already stored its object under this ARK, which ZooKeeper no longer had (restored from an older snapshot?); it is taken again",
				"job", j.ID, "ark", ark, "passed_over", skipped, "unused_among_them", unused)
			return ark, nil
		}
		if !used {
			next := ""
			if !minted || skipped > 0 {
				if next, err = recordedPast(ctx, inv, prof, ark); backEndDown(err) {
					return "", p.inventoryOut(prof, fmt.Errorf("minting: what the inventory records after %s: %w", ark, err))
				} else if err != nil {
					// It answered Object just now, so it is up: it lists no objects
					// (a service older than decision 439) or refused this page. The
					// walk ends here, as before it went past gaps; a failure would
					// spend a try of every deposit, whose retry takes this ARK.
					p.log.Warn("minting: the inventory did not list what it records after this ARK, which is taken without looking past it",
						"job", j.ID, "ark", ark, "err", err)
				}
			}
			if next == "" {
				if skipped > 0 {
					p.log.Warn("minting: passed over ARKs already in use (the minter's counter in ZooKeeper was behind the storage: a new queue over old storage, or ZooKeeper restored from an older snapshot?)",
						"job", j.ID, "skipped", skipped, "unused_among_them", unused, "ark", ark)
				}
				return ark, nil
			}
			unused++
		}
		if skipped >= maxMintSkips {
			return "", reactor.Fatal(fmt.Errorf("minting: %d ARKs in a row, up to %s, already name stored objects or lie between them: the minter's counter "+
				"(%s/%s in ZooKeeper) is far behind the storage; give the profile a new shoulder, or look at the queue's history", skipped+1, ark, prof.NAAN, prof.Shoulder))
		}
		if used {
			p.giveBack(ctx, ark, made)
		}
		if err := p.minter.Forget(ctx, j.ID); err != nil { // the next Mint advances the counter
			return "", fmt.Errorf("minting: %w", err)
		}
	}
}

// recordedPast returns the first object the inventory records after ark
// minted from ark's counter, when it is within maxMintGap of ark ("" for
// none). The ARKs of one counter sort in the order they were minted.
func recordedPast(ctx context.Context, inv inventory.Inventory, prof *profile.Profile, ark string) (string, error) {
	n, ok := mint.Number(ark, prof.NAAN, prof.Shoulder)
	if !ok {
		return "", nil
	}
	rows, err := inv.List(ctx, ark, recordedPastPage)
	if err != nil {
		return "", err
	}
	prefix := "ark:/" + prof.NAAN + "/" + prof.Shoulder
	for _, r := range rows {
		if !strings.HasPrefix(r.ARK, prefix) {
			break // past every ARK of the counter
		}
		if m, ok := mint.Number(r.ARK, prof.NAAN, prof.Shoulder); ok {
			if m-n <= maxMintGap {
				return r.ARK, nil
			}
			break
		}
	}
	return "", nil
}

// giveBack records ark as the minted ARK of the job whose deposit made its
// stored version (made, the version's message), when that job is in the
// queue, is that deposit (the same batch and creation time) and has no ARK
// yet: its Processing then takes it instead of minting another. A job that
// minted another meanwhile is told in the log: its object may be stored
// under both.
func (p *Pipeline) giveBack(ctx context.Context, ark, made string) {
	d, ok, err := depositIn(storage.Version{Message: made})
	if !ok || err != nil {
		return // no deposit's version (an import's, a service's), or not one as ingestq writes it
	}
	jid := d.Job
	x, err := p.q.LoadJob(ctx, jid)
	if err != nil || depositMessage(x, x.Created) != made || x.Identifiers != nil && x.Identifiers.PrimaryID != "" {
		return // another queue's job, gone, or identified: nothing to give
	}
	have, err := p.minter.Give(ctx, jid, ark)
	switch {
	case err != nil:
		p.log.Warn("minting: could not give a stored object's ARK back to the job that stored it", "job", jid, "ark", ark, "err", err)
	case have != ark:
		p.log.Error("minting: a job that stored its object before ZooKeeper lost its states has minted another ARK since: "+
			"its object may be stored under both (ingestq object ARK)", "job", jid, "stored_as", ark, "minted", have)
	default:
		p.log.Warn("minting: gave a stored object's ARK back to the job that stored it (ZooKeeper restored from an older snapshot?)", "job", jid, "ark", ark)
	}
}

// arkInUse tells whether ark names an object in the profile's inventory or
// in its primary storage target, and the message of the primary's latest
// version of it, which names the deposit that made it ("" for none).
func (p *Pipeline) arkInUse(ctx context.Context, prof *profile.Profile, inv inventory.Inventory, ark string) (used bool, made string, err error) {
	used, err = inInventory(ctx, inv, ark)
	if err != nil {
		return false, "", p.inventoryOut(prof, fmt.Errorf("minting: is %s in the inventory: %w", ark, err))
	}
	primary := p.targets(prof)[0]
	v, stored, err := p.inStorage(ctx, primary, ark)
	return used || stored, v.Message, p.storageOut(primary, wrapIf(err, "minting: is %s in storage", ark))
}

// wrapIf is fmt.Errorf(format+": %w", args..., err), or nil for no err.
func wrapIf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
