package handlers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
// recorded folder is usable here, or (a job downloaded before folders were
// recorded) its folder is here.
func (p *Pipeline) filesHere(j *queue.Job) bool {
	if j.Config.WorkingDir != "" {
		return p.usable(j)
	}
	_, err := os.Stat(filepath.Join(p.work, j.ID))
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
		p.log.Info("taking over a job whose files are on another host: running its earlier steps again here",
			"job", j.ID, "state", s, "files_on", j.Config.WorkingHost)
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
// job that is gone, Completed or Deleted (a crash between Notify's commit
// and its removal; an operator's delete), and, without a shared area, of a
// job another host took over while this one was down. Run at start, before
// the reactor takes work here. A folder it cannot judge (ZooKeeper did not
// answer) is kept.
func (p *Pipeline) Sweep(ctx context.Context) (removed int, err error) {
	entries, err := os.ReadDir(p.work)
	if err != nil {
		return 0, fmt.Errorf("sweeping the working area: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "jid") {
			continue
		}
		j, err := p.q.LoadJob(ctx, e.Name())
		switch {
		case errors.Is(err, queue.ErrNotFound):
		case err != nil:
			if ctx.Err() != nil {
				return removed, ctx.Err()
			}
			continue
		case j.State() == queue.Completed || j.State() == queue.Deleted:
		case !p.cfg.SharedWork && j.Config.WorkingHost != "" && j.Config.WorkingHost != p.cfg.Host:
		default:
			continue
		}
		if err := os.RemoveAll(filepath.Join(p.work, e.Name())); err != nil {
			p.log.Warn("sweep: working folder not removed", "folder", e.Name(), "err", err)
			continue
		}
		removed++
	}
	return removed, nil
}
