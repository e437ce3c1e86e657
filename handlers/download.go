package handlers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/container"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// progressEvery is the least time between two progress events of a job.
const progressEvery = 500 * time.Millisecond

// A job's downloaded files smaller than deferSyncBelow are fsynced
// together once all are downloaded, syncParallel at once: syncs under way
// together share the file system's journal commits, where a sync per small
// file costs a commit each (1,000 × 4 KiB: Downloading 25 to 40 % faster
// here). A bigger file is synced as it lands, while others still download:
// deferred, its writeback came all at the end and the step was slower.
const (
	deferSyncBelow = 1 << 20
	syncParallel   = 16
)

// download fetches a job's files into its working folder, PerJob at a
// time, and verifies each against the manifest's digest and size. A file
// already there was downloaded and verified by an earlier run (downloads
// land under a temporary name and are renamed once verified), so a retry
// only checks it again. A container is then unpacked into producer/.
func (p *Pipeline) download(ctx context.Context, s *reactor.Step) (_ reactor.Result, err error) {
	j := s.Job
	prof, err := p.jobProfile(j)
	if err != nil {
		return reactor.Result{}, err
	}
	files, wait, err := p.stepFiles(ctx, s, prof)
	if wait != nil {
		return *wait, err
	}
	if err != nil {
		return reactor.Result{}, err
	}
	work := p.workDir(j)
	pr := p.newProgress(s, files)
	client := p.client(prof)
	// Every folder a file lands in, up to the one holding the working
	// folder: made once here, and synced once each after the downloads
	// instead of once per file.
	dests := make([]string, len(files))
	dirs := map[string]bool{p.work: true}
	for i, f := range files {
		if !filepath.IsLocal(f.Name) { // CleanName checked it already; never trust one check with the disk
			return reactor.Result{}, reactor.Fatal(fmt.Errorf("file name %q leaves the working folder", f.Name))
		}
		dests[i] = filepath.Join(work, filepath.FromSlash(f.Name))
		for d := filepath.Dir(dests[i]); !dirs[d] && d != filepath.Dir(d); d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return reactor.Result{}, err
		}
	}
	p.tend(j.ID, work)
	// What this run verified: each file's SHA-256, from the same pass as
	// the depositor's digest.
	rec := &digests{files: map[string]fileDigest{}}
	busy := &busyAnswers{}
	before, tried := p.tryAfterWaits(j.ID)
	defer tried()
	waiting := false
	defer func() {
		// The step's success ends the job's waits for a busy server; its
		// failure (Failed, deleted) does through the watch of its end (tend).
		// A retryable error between busy answers (a 500, a cut) does not: it
		// reset their clock, and a server alternating the two was waited
		// for without end.
		if err == nil && !waiting {
			p.endWaits(j.ID)
		}
	}()
	asked := p.askedAgain(ctx, s)
	s.Doing(depositorServers(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.PerJob)
	for i, f := range files {
		dest := dests[i]
		want := f.Want
		want.DeferSync = want.Size >= 0 && want.Size < deferSyncBelow
		g.Go(func() error {
			if before != nil { // verified by the try before its wait for a busy server
				if fi, err := os.Stat(dest); err == nil {
					if sum, ok := before.unchanged(f.Name, fi); ok {
						busy.unread.Add(1)
						pr.done(f.Want.Size, true)
						rec.addInfo(f.Name, sum, fi)
						return nil
					}
				}
			}
			if res, err := fetch.Verify(dest, f.Want); err == nil {
				pr.done(f.Want.Size, true)
				return rec.add(work, f.Name, res.SHA256)
			} else if !errors.Is(err, fs.ErrNotExist) {
				p.log.Warn("downloading: a kept file no longer verifies; fetching it again", "job", j.ID, "file", f.Name, "err", err)
				_ = os.Remove(dest)
			}
			res, err := client.Download(fetch.WithRetryNote(gctx, asked(f.Name)), f.URL, dest, want, pr.add)
			if busy.add(f.Name, err) {
				return nil // the job's other files go on; then it waits for this one
			}
			if err != nil {
				return classify(fmt.Errorf("%s: %w", f.Name, err))
			}
			pr.done(res.Bytes, false)
			return rec.add(work, f.Name, res.SHA256)
		})
	}
	if err := g.Wait(); err != nil {
		if held := pr.bytes.Load(); p.overran(j, held, err) {
			parts := make([]string, len(dests))
			for i, dest := range dests {
				parts[i] = fetch.PartFile(dest)
			}
			p.removeWritten(j, parts...)
			return reactor.Result{}, p.overranError(j, held, "a file of no size in the manifest sent more than its estimate holds "+
				"(its server gave no size, or a wrong one), or never ends", err)
		}
		return reactor.Result{}, err
	}
	if busy.n > 0 {
		res, err := p.waitForBusyServer(ctx, s, busy, rec)
		waiting = err == nil
		return res, err
	}
	if err := p.logFixity(j, files); err != nil {
		return reactor.Result{}, err
	}
	if typ := j.Config.PayloadType; typ == TypeManifest || typ == TypeFile {
		if err := p.prune(j, files); err != nil {
			return reactor.Result{}, err
		}
	}
	// The files (their data, then their names: the renames, and folders
	// made on the way) are durable only now, synced together. Kept files
	// of an earlier run are covered too: that run may have died before
	// this point.
	if err := durable.SyncFiles(dests, syncParallel); err != nil {
		return reactor.Result{}, err
	}
	if err := syncDirs(dirs); err != nil {
		return reactor.Result{}, err
	}
	if j.Config.PayloadType == TypeContainer {
		if err := p.extract(j, work, rec); err != nil {
			var later errNoRoomYet
			if errors.As(err, &later) {
				p.log.Info("downloading: no room to unpack the zip yet; job waits", "job", j.ID, "why", later.why,
					"retest_in", p.cfg.ProvisionWait)
				return p.waitForRoom(ctx, s, later.why), nil
			}
			return reactor.Result{}, err
		}
	}
	if err := rec.write(work); err != nil {
		return reactor.Result{}, err
	}
	space, err := treeSize(filepath.Join(work, producerDir))
	if err != nil {
		return reactor.Result{}, err
	}
	return reactor.Result{Change: queue.JobChange{SpaceNeeded: &space, Config: p.placed(j, work)},
		Attrs: map[string]any{"files": len(files), "bytes": pr.bytes.Load(), "skipped": pr.skipped.Load()}}, nil
}

// askedAgain is, for a file's name, the note (fetch.WithRetryNote) of the
// step's download of it asked again in the fetch client: the job's message
// and progress event (sayWhyItWaits), once a request. A server that stalls
// mid-body holds the job a --fetch-timeout per request, five by default,
// and only the daemon's log said why. The files download at once and their
// notes change the job's status, which sayWhyItWaits reads: one at a time.
func (p *Pipeline) askedAgain(ctx context.Context, s *reactor.Step) func(name string) func(fetch.Retry) {
	var saying sync.Mutex
	return func(name string) func(fetch.Retry) {
		return func(r fetch.Retry) {
			saying.Lock()
			defer saying.Unlock()
			p.sayWhyItWaits(ctx, s, fmt.Sprintf("downloading %s: %s; asked again (request %d of %d, --fetch-attempts)",
				name, fetch.Plain(r.Err), r.Request, r.Of), nil)
		}
	}
}

// depositorServers names the servers a job's downloads wait on (Step.Doing:
// a download running long is listed with them in its host's node, and `ls
// jobs --stalled` says them), where only "lock held by" said a download of
// hours. Never a back end's name: a step that succeeds got an answer from
// each, and no outage is ever named after a depositor's server.
func depositorServers(files []file) string {
	var hosts []string
	for _, f := range files {
		if h := serverOf(f.URL); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	switch len(hosts) {
	case 0:
		return "the depositor's files"
	case 1:
		return "the depositor's server " + hosts[0]
	case 2, 3:
		return "the depositor's servers " + strings.Join(hosts, ", ")
	}
	return fmt.Sprintf("the depositor's servers %s and %d more", strings.Join(hosts[:3], ", "), len(hosts)-3)
}

// serverOf is rawURL's host, or "" when it has none or when the URL, its
// secrets masked (redact.URLs), has another host: url.Parse reads a
// password's start as a port where the password holds "?", "/" or "#"
// (https://user:12?ss@host/f has host "user:12"), and the host node would
// show the user name and those digits, which every log masks. Only a URL
// with an "@" has a user's secret (a manifest's thousands of others are
// not masked for nothing).
func serverOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	if !strings.Contains(rawURL, "@") {
		return u.Host
	}
	if shown, err := url.Parse(redact.URLs(rawURL)); err != nil || shown.Host != u.Host {
		return ""
	}
	return u.Host
}

// overran tells whether err is a write that found the working storage
// full while the job held more there (held bytes) than the room
// Provisioning found for it: its estimate and --space-margin. Such a job
// fails, and what it wrote goes: left to wait (workFull), it waited for
// room it took itself, and every other job of the host with it, for good.
// A job within its room waits, as for any back end: another program filled
// the disk.
func (p *Pipeline) overran(j *queue.Job, held int64, err error) bool {
	full, inWork := p.noRoom(err)
	return full && inWork && held > j.SpaceNeeded+p.cfg.Margin
}

// overranError is the failure of a job that overran (why: how), err as
// text: wrapped, workFull would make it a wait for room again.
func (p *Pipeline) overranError(j *queue.Job, held int64, why string, err error) error {
	return reactor.Fatal(fmt.Errorf("%v: the job holds %d bytes in the working storage, more than the room Provisioning found for it "+
		"(its estimate, %d bytes, and --space-margin, %d bytes): %s; what it wrote there is removed", err, held, j.SpaceNeeded, p.cfg.Margin, why))
}

// removeWritten removes what a failed step of job j wrote (paths), logging
// what could not be.
func (p *Pipeline) removeWritten(j *queue.Job, paths ...string) {
	for _, path := range paths {
		if err := os.RemoveAll(path); err != nil {
			p.log.Warn("downloading: what a failed step wrote is left", "job", j.ID, "err", err)
		}
	}
}

// extract unpacks the job's container into producer/, durably, and
// records the SHA-256 of each file, computed while it was written.
func (p *Pipeline) extract(j *queue.Job, work string, rec *digests) error {
	zip, dest := filepath.Join(work, containerFile), filepath.Join(work, producerDir)
	lim := p.cfg.Containers
	var release func()
	lim.Fits, release = p.roomToUnpack(j, dest)
	files, err := container.ExtractAs(zip, j.Config.PayloadURL, dest, lim)
	release()
	if later := (errNoRoomYet{}); errors.As(err, &later) {
		return later // nothing was unpacked; an earlier run's files stay, counted as room
	}
	if err != nil {
		// What it unpacked before it failed is ours to remove (container.Extract;
		// a retry unpacks again): a zip bigger than the disk left it full.
		held, sizeErr := treeSize(work)
		p.removeWritten(j, dest)
		if sizeErr == nil && p.overran(j, held, err) {
			return p.overranError(j, held, "what its zip unpacks to is not in its estimate, the zip's size", err)
		}
		return reactor.Fatal(err)
	}
	if err := durable.SyncTree(dest); err != nil {
		return err
	}
	for _, f := range files {
		if err := rec.add(work, path.Join(producerDir, f.Name), f.SHA256); err != nil {
			return err
		}
	}
	return nil
}

// syncDirs makes each folder's entries durable.
func syncDirs(dirs map[string]bool) error {
	for d := range dirs {
		if err := durable.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// treeSize is the total size of the regular files under dir.
func treeSize(dir string) (int64, error) { return filesSize(dir, false) }

// freedByReplacing is the total size of the regular files under dir whose
// removal frees their room: those of one link.
func freedByReplacing(dir string) (int64, error) { return filesSize(dir, true) }

// filesSize is the total size of the regular files under dir, of those of
// one link only when soleLink.
func filesSize(dir string, soleLink bool) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); !soleLink || ok && st.Nlink == 1 {
			n += info.Size()
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return n, err
}

// progress counts a job's downloaded files and bytes and publishes them as
// progress events, at most every progressEvery, and when the last file is done.
type progress struct {
	p           *Pipeline
	j           *queue.Job
	step        *reactor.Step // told of the bytes fetched, for the metrics
	files       int
	totalBytes  int64
	doneFiles   atomic.Int64
	bytes       atomic.Int64
	skipped     atomic.Int64
	mu          sync.Mutex
	lastPublish time.Time
}

func (p *Pipeline) newProgress(s *reactor.Step, files []file) *progress {
	j := s.Job
	pr := &progress{p: p, j: j, step: s, files: len(files), lastPublish: time.Now()}
	for _, f := range files {
		if f.Want.Size > 0 {
			pr.totalBytes += f.Want.Size
		}
	}
	if pr.totalBytes == 0 {
		pr.totalBytes = j.SpaceNeeded
	}
	return pr
}

// add counts bytes as they arrive.
func (pr *progress) add(delta int64) {
	pr.bytes.Add(delta)
	pr.step.Moved()
	pr.step.Transferred(reactor.Downloaded, delta)
	pr.mu.Lock()
	due := time.Since(pr.lastPublish) >= progressEvery
	pr.mu.Unlock()
	if due {
		pr.publish()
	}
}

// done counts a finished file: fetched, or found verified (its bytes then
// count as done without being fetched).
func (pr *progress) done(size int64, skipped bool) {
	if skipped {
		pr.skipped.Add(1)
		pr.bytes.Add(max(size, 0))
	}
	n := pr.doneFiles.Add(1)
	pr.mu.Lock()
	due := time.Since(pr.lastPublish) >= progressEvery
	pr.mu.Unlock()
	if due || n == int64(pr.files) { // at most every progressEvery, and the last
		pr.publish()
	}
}

func (pr *progress) publish() {
	pr.mu.Lock()
	pr.lastPublish = time.Now()
	pr.mu.Unlock()
	if pr.p.cfg.Bus == nil {
		return
	}
	pr.p.cfg.Bus.Publish(events.Event{Kind: events.KindProgress, BatchID: pr.j.BatchID, JobID: pr.j.ID,
		To: string(queue.Downloading), Attrs: map[string]any{
			"files_done": pr.doneFiles.Load(), "files_total": pr.files, "skipped": pr.skipped.Load(),
			"bytes_done": pr.bytes.Load(), "bytes_total": pr.totalBytes}})
}

// prune removes from the job's producer folder what its file list does not
// name: files of an earlier manifest that a requeue fetched again without
// them, and their partial downloads. Processing stores the whole folder.
func (p *Pipeline) prune(j *queue.Job, files []file) error {
	work := p.workDir(j)
	keep := make(map[string]bool, len(files))
	for _, f := range files {
		keep[filepath.Join(work, filepath.FromSlash(f.Name))] = true
	}
	return filepath.WalkDir(filepath.Join(work, producerDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || keep[path] {
			return err
		}
		p.log.Warn("downloading: removing a file its manifest no longer lists", "job", j.ID, "file", path)
		return os.Remove(path)
	})
}

// logFixity logs a PREMIS fixity check for each file verified against a
// digest the depositor gave.
func (p *Pipeline) logFixity(j *queue.Job, files []file) error {
	var evs []inventory.Event
	for _, f := range files {
		if f.Want.Digest == "" {
			continue
		}
		evs = append(evs, p.event(j.ID, inventory.EventFixityCheck, f.Name, "download",
			fmt.Sprintf("downloaded from %s; matched the depositor's %s %s", redact.Location(f.URL), f.Want.Alg, f.Want.Digest)))
	}
	_, err := p.logEvents(j, evs...)
	return err
}
