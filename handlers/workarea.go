package handlers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// The working area. A job's files are downloaded into one folder, used by
// every later step and removed at Notify. With a working area every host
// mounts (Config.SharedWork), the folder recorded in the job's
// configuration (working_dir) serves every host. Without one, Downloading
// also records its host (working_host): the reactor sends the later steps
// there while that host lives, and a host that takes the job over after it
// died fetches the files again (adopting).

// workDir is a job's working folder: the one its configuration records,
// when this host can use it, else <work>/<jid>. A recorded folder outside
// this host's working area is never used: it is not ours to write or
// remove, whoever wrote it.
func (p *Pipeline) workDir(j *queue.Job) string {
	if d := j.Config.WorkingDir; d != "" && p.usable(j) {
		return d
	}
	return filepath.Join(p.work, j.ID)
}

// usable tells whether the folder j's configuration records holds the
// job's files for this host: on the shared area, or on this host.
func (p *Pipeline) usable(j *queue.Job) bool {
	d := j.Config.WorkingDir
	if d == "" || !filepath.IsAbs(d) {
		return false
	}
	if rel, err := filepath.Rel(p.work, filepath.Clean(d)); err != nil || !filepath.IsLocal(rel) {
		return false
	}
	return p.cfg.SharedWork || j.Config.WorkingHost == p.cfg.Host
}

// filesHere tells whether this host has the job's downloaded files: its
// recorded folder is usable here (or, a job downloaded before folders were
// recorded, its folder is here), and it is there: a working area lost (a
// disk replaced) or a ZooKeeper restored to before Notify removed it has
// the job's earlier steps run again too.
func (p *Pipeline) filesHere(j *queue.Job) bool {
	if j.Config.WorkingDir != "" && !p.usable(j) {
		return false
	}
	_, err := os.Stat(p.workDir(j))
	return err == nil
}

// placed is j's configuration naming where Downloading put its files, or
// nil when it says so already.
func (p *Pipeline) placed(j *queue.Job, dir string) *queue.JobConfig {
	host := p.cfg.Host
	if p.cfg.SharedWork {
		host = "" // any host: nothing to send anywhere
	}
	if j.Config.WorkingDir == dir && j.Config.WorkingHost == host {
		return nil
	}
	c := j.Config
	c.WorkingDir, c.WorkingHost = dir, host
	return &c
}

// earlierStep is a step whose output a later step works on.
type earlierStep struct {
	state queue.State
	run   reactor.JobHandlerFunc
}

// earlier are those steps, in order.
func (p *Pipeline) earlier() []earlierStep {
	return []earlierStep{{queue.Downloading, p.download}, {queue.Processing, p.process}, {queue.Storing, p.storeObject}}
}

// adopting runs h after taking the job over when its files are on another
// host (which the reactor found gone, or not working this state): the
// earlier steps run again here, from Downloading (which fetches only what
// this host lacks) up to the step before s, and what each would have
// written with its transition is checkpointed. Each of them is safe to run
// again: no identifier is minted twice and storage makes no new version of
// the same content.
func (p *Pipeline) adopting(s queue.State, h reactor.JobHandler) reactor.JobHandler {
	return reactor.JobHandlerFunc(func(ctx context.Context, st *reactor.Step) (reactor.Result, error) {
		j := st.Job
		if p.filesHere(j) {
			return h.Handle(ctx, st)
		}
		p.log.Info("taking over a job whose files are on another host, or whose working folder is gone: running its earlier steps again here",
			"job", j.ID, "state", s, "files_on", j.Config.WorkingHost, "folder", p.workDir(j))
		at := slices.Index(reactor.JobStates, s)
		for _, e := range p.earlier() {
			if slices.Index(reactor.JobStates, e.state) >= at {
				break
			}
			res, err := e.run(ctx, st)
			if err != nil {
				return reactor.Result{}, fmt.Errorf("taking the job over from %s, %s again: %w", j.Config.WorkingHost, e.state, err)
			}
			if err := st.Checkpoint(ctx, "the result of "+string(e.state)+" again", res.Change); err != nil {
				return reactor.Result{}, err
			}
		}
		return h.Handle(ctx, st)
	})
}

// Sweep removes the working folders on this host that no job needs: of a
// job that has ended (a crash between Notify's commit and its removal; a
// job another program ended or deleted while this daemon was down) and,
// without a shared area, of a job another host took over while this one
// was down. Run at start, before the reactor takes work here. Every other
// folder is watched (tend) from then on. A folder it cannot judge
// (ZooKeeper did not answer) is kept and watched.
func (p *Pipeline) Sweep(ctx context.Context) (removed int, err error) {
	entries, err := os.ReadDir(p.work)
	if err != nil {
		return 0, fmt.Errorf("sweeping the working area %s: %w", p.work, err)
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "jid") {
			continue
		}
		dir := filepath.Join(p.work, e.Name())
		j, err := p.q.LoadJob(ctx, e.Name())
		switch {
		case ended(j, err):
		case err != nil && ctx.Err() != nil:
			return removed, ctx.Err()
		case err == nil && !p.cfg.SharedWork && j.Config.WorkingHost != "" && j.Config.WorkingHost != p.cfg.Host:
		default:
			p.tend(e.Name(), dir)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			p.log.Warn("sweep: working folder not removed", "folder", dir, "err", err)
			continue
		}
		removed++
	}
	return removed, nil
}

// Ended tells whether a job in state s has ended, Completed or Deleted:
// its working folder serves no step again.
func Ended(s queue.State) bool { return s == queue.Completed || s == queue.Deleted }

// ended tells whether a job read with err has ended, or its node is gone.
func ended(j *queue.Job, err error) bool {
	if err != nil {
		return errors.Is(err, queue.ErrNotFound)
	}
	return Ended(j.State())
}

// tend removes dir, job jid's working folder on this host, as soon as the
// job ends, whoever ends it: Notify here removes it itself, but another
// program (a Merritt worker taking the job at Recording or Notify, an
// operator's delete, a purge from another host) tells no one. A one-shot
// watch on the job's status fires at each of its changes and at its
// removal, so the folder goes within tendEvery, with no polling of
// ZooKeeper; one watch a folder, however many jobs the queue holds. The
// watches are looked at by one goroutine (tendLoop), not one each: a host
// that estimated 100,000 jobs of object manifests keeps a folder of each
// until another host downloads and ends it, and a goroutine a folder cost
// 6.9 kB each (690 MB). It ends at Close.
func (p *Pipeline) tend(jid, dir string) {
	if p.closing.Err() != nil {
		return
	}
	if _, watched := p.tending.LoadOrStore(jid, &tended{dir: dir}); watched {
		return
	}
	p.tendStart.Do(func() {
		p.tendNow = make(chan struct{}, 1)
		p.tenders.Go(p.tendLoop)
	})
	select { // its first look now, not at the next tick
	case p.tendNow <- struct{}{}:
	default:
	}
}

// tended is a folder tend keeps: what fires at its job's next change (nil:
// look now, or at retry after ZooKeeper did not answer).
type tended struct {
	dir     string
	next    <-chan zk.Event
	outages int
	retry   time.Time
}

// tendEvery is how often tendLoop looks for fired watches; tendLooks how
// many jobs it reads at once.
const (
	tendEvery = time.Second
	tendLooks = 16
)

// tendLoop looks at each tended job whose watch fired, until Close.
func (p *Pipeline) tendLoop() {
	t := time.NewTicker(tendEvery)
	defer t.Stop()
	for {
		now := time.Now()
		var due []string
		p.tending.Range(func(k, v any) bool {
			if v.(*tended).due(now) {
				due = append(due, k.(string))
			}
			return true
		})
		var g errgroup.Group
		g.SetLimit(tendLooks)
		for _, jid := range due {
			g.Go(func() error { p.lookAgain(jid); return nil })
		}
		_ = g.Wait()
		select {
		case <-p.closing.Done():
			return
		case <-t.C:
		case <-p.tendNow:
		}
	}
}

// due tells whether the folder's job is to be read now: its watch fired,
// or its retry came.
func (w *tended) due(now time.Time) bool {
	if w.next == nil {
		return !now.Before(w.retry)
	}
	select {
	case <-w.next:
		w.next = nil
		return true
	default:
		return false
	}
}

// lookAgain reads job jid's status for its tended folder (look), and
// forgets the folder once removed.
func (p *Pipeline) lookAgain(jid string) {
	v, ok := p.tending.Load(jid)
	if !ok {
		return
	}
	w := v.(*tended)
	next, err := p.look(jid, w.dir)
	switch {
	case err != nil: // ZooKeeper out of reach: look again after a while
		p.log.Debug("working folder: job not read; trying again", "job", jid, "err", err)
		w.outages++
		w.retry = time.Now().Add(backoff.Delay(time.Second, time.Minute, w.outages))
	case next == nil:
		p.tending.Delete(jid)
	default:
		w.outages, w.next = 0, next
	}
}

// look removes job jid's folder dir when the job has ended and no session
// holds it (a step here still working on it), and otherwise gives what
// fires at the job's next change, or its lock's release (nil: removed).
// A change costs a read of the status and a watch; the whole job is read
// only once it has ended, and only when the folder is still here.
func (p *Pipeline) look(jid, dir string) (<-chan zk.Event, error) {
	ctx := p.closing
	st, version, err := p.q.JobStatusOf(ctx, jid)
	if err != nil && !errors.Is(err, queue.ErrNotFound) {
		return nil, err
	}
	if err != nil || Ended(st.Status) || st.Status == queue.Failed {
		p.endWaits(jid) // failed, deleted or gone while it waited for its object
	}
	if err == nil && !Ended(st.Status) {
		return watched(p.q.WatchJobChange(ctx, jid, version))
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, nil // Notify here removed it
	}
	j, err := p.q.LoadJob(ctx, jid)
	switch {
	case err != nil && !errors.Is(err, queue.ErrNotFound):
		return nil, err
	case err == nil && !Ended(j.State()): // moved back meanwhile
		return watched(p.q.WatchJobChange(ctx, jid, j.StatusVersion()))
	case err == nil && j.Locked:
		return watched(p.q.WatchOnce(ctx, p.q.JobLockWait(ctx, jid)))
	}
	if err := os.RemoveAll(dir); err != nil {
		p.log.Warn("working folder of an ended job not removed; the next start's sweep tries again", "job", jid, "folder", dir, "err", err)
		return nil, nil
	}
	how := "its node removed"
	if j != nil {
		how = string(j.State())
	}
	p.log.Info("working folder removed: its job ended", "job", jid, "ended", how, "folder", dir)
	return nil, nil
}

// watched gives a watch's channel, or one that fires at once when what it
// watches changed already.
func watched(fired <-chan zk.Event, changed bool, err error) (<-chan zk.Event, error) {
	if err != nil || !changed {
		return fired, err
	}
	now := make(chan zk.Event)
	close(now)
	return now, nil
}
