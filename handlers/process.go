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

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/handlers/internal/durable"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// process gives the object its identifier, writes its system files and the
// storage manifest. The identifier comes from the inventory when one of the
// job's local ids is already an object there (this deposit is an update of
// it), else from the depositor, else from the minter; it is written to
// ZooKeeper before anything else, so a restart never mints again.
func (p *Pipeline) process(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, err := p.profile(j.Profile())
	if err != nil {
		return reactor.Result{}, err
	}
	ids, update, err := p.identify(ctx, s, prof)
	if err != nil {
		return reactor.Result{}, err
	}
	work := p.workDir(j)
	if err := writeSystemFiles(filepath.Join(work, systemDir), j, ids); err != nil {
		return reactor.Result{}, err
	}
	entries, err := hashTree(work, producerDir, systemDir)
	if err != nil {
		return reactor.Result{}, err
	}
	if entries, err = p.writePremis(ctx, j, ids, update, entries); err != nil {
		return reactor.Result{}, err
	}
	if !slices.ContainsFunc(entries, func(e manifestEntry) bool { return filepath.Dir(e.Name) != systemDir }) {
		return reactor.Result{}, reactor.Fatal(errors.New("the object has no files"))
	}
	if entries, err = writeObjectManifest(work, entries); err != nil {
		return reactor.Result{}, err
	}
	mpath := filepath.Join(work, storageManifest)
	if err := writeStorageManifest(mpath, entries); err != nil {
		return reactor.Result{}, err
	}
	mode := "add"
	if update {
		mode = "update"
	}
	return reactor.Result{
		Change: queue.JobChange{Store: &queue.StepManifest{ManifestURL: p.storeManifestURL(j), Mode: mode}},
		Attrs:  map[string]any{"ark": ids.PrimaryID, "mode": mode, "files": len(entries)},
	}, nil
}

// identify settles the job's primary identifier and writes it to ZooKeeper
// when it is new. update tells that a local id named an existing object.
func (p *Pipeline) identify(ctx context.Context, s *reactor.Step, prof *profile.Profile) (*queue.Identifiers, bool, error) {
	j := s.Job
	ids := &queue.Identifiers{}
	if j.Identifiers != nil {
		*ids = *j.Identifiers
		ids.LocalIDs = slices.Clone(ids.LocalIDs)
	}
	given := ids.PrimaryID
	var found string
	inv, err := p.inventoryFor(ctx, prof)
	if err != nil {
		return nil, false, err
	}
	for _, lid := range ids.LocalIDs {
		ark, ok, err := inv.LookupLocalID(ctx, prof.Name, lid)
		if err != nil {
			return nil, false, fmt.Errorf("local id %q: inventory lookup: %w", lid, err)
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
	case ids.PrimaryID == "":
		ark, err := p.minter.Mint(ctx, j.ID, prof.NAAN, prof.Shoulder)
		if err != nil {
			return nil, false, fmt.Errorf("minting: %w", err)
		}
		ids.PrimaryID = ark
	}
	if ids.LocalIDs == nil {
		ids.LocalIDs = []string{} // mrt-zk's readers expect a list, never null
	}
	if j.Identifiers == nil || j.Identifiers.PrimaryID != ids.PrimaryID {
		if err := s.Checkpoint(ctx, "identifier "+ids.PrimaryID, queue.JobChange{Identifiers: ids}); err != nil {
			return nil, false, err
		}
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

// hashTree lists and hashes the regular files under the given folders of
// root, in name order. A symlink or other special file is refused.
func hashTree(root string, dirs ...string) ([]manifestEntry, error) {
	var out []manifestEntry
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if !de.Type().IsRegular() {
				return reactor.Fatal(fmt.Errorf("%s: not a regular file", filepath.ToSlash(rel)))
			}
			out = append(out, manifestEntry{Name: filepath.ToSlash(rel), Path: path})
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(context.Background())
	g.SetLimit(hashParallel)
	for i := range out {
		e := &out[i] // each goroutine fills its own entry
		g.Go(func() (err error) {
			if gctx.Err() != nil {
				return nil // another file failed: the step fails anyway
			}
			e.SHA256, e.Size, err = sha256File(e.Path)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b manifestEntry) int { return cmpString(a.Name, b.Name) })
	return out, nil
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
func (p *Pipeline) writePremis(ctx context.Context, j *queue.Job, ids *queue.Identifiers, update bool, entries []manifestEntry) ([]manifestEntry, error) {
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
	file := filepath.Join(p.workDir(j), filepath.FromSlash(name))
	if err := durable.WriteFile(file, premisXML(ids.PrimaryID, p.cfg.Agent, all)); err != nil {
		return nil, fmt.Errorf("writing %s: %w", premisFile, err)
	}
	sum, size, err := sha256File(file)
	if err != nil {
		return nil, err
	}
	return append(entries, manifestEntry{Name: name, Path: file, Size: size, SHA256: sum}), nil
}
