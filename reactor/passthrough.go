package reactor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
)

// PassThroughScheme is the payload URL scheme of pass-through batches:
// "passthrough:N" makes N jobs.
const PassThroughScheme = "passthrough:"

// PassThrough is a pipeline that does no work, for tests and benchmarks of
// the reactor itself: every step succeeds after Delay. A job whose
// configuration has "fail_at": "<State>" fails fatally in that state; one
// with "flaky_at": "<State>" and "flaky_times": n fails retryably the first
// n times it runs that state on a daemon.
type PassThrough struct {
	Delay time.Duration
}

// Handlers returns a handler for every job state from Estimating to Notify.
func (p PassThrough) Handlers() map[queue.State]JobHandler {
	hs := map[queue.State]JobHandler{}
	var tries sync.Map // jid → times a flaky step ran
	for _, s := range JobStates[1:] {
		hs[s] = JobHandlerFunc(func(ctx context.Context, step *Step) (Result, error) {
			j := step.Job
			if j.Config.Extra.String("fail_at") == string(s) {
				return Result{}, Fatal(fmt.Errorf("pass-through failure asked for in %s", s))
			}
			if j.Config.Extra.String("flaky_at") == string(s) {
				n, _ := j.Config.Extra.Number("flaky_times")
				v, _ := tries.LoadOrStore(j.ID, new(atomic.Int32))
				if t := v.(*atomic.Int32).Add(1); t <= int32(n) {
					return Result{}, fmt.Errorf("pass-through flaky failure %d of %d in %s", t, int(n), s)
				}
			}
			if p.Delay > 0 && !backoff.Sleep(ctx, p.Delay) {
				return Result{}, ctx.Err()
			}
			return Result{}, nil
		})
	}
	return hs
}

// Objects gives N objects for a "passthrough:N" payload. A "fail_at" or
// "flaky_at" (with "flaky_times") in the submission is passed to the job
// whose number is "fail_job" (default 0).
func (p PassThrough) Objects(ctx context.Context, b *queue.Batch) ([]Object, error) {
	sub := b.Submission
	url := sub.PayloadURL
	n, err := strconv.Atoi(strings.TrimPrefix(url, PassThroughScheme))
	if !strings.HasPrefix(url, PassThroughScheme) || err != nil || n < 0 {
		return nil, Fatal(fmt.Errorf("payload_url %q: the pass-through pipeline takes %sN", url, PassThroughScheme))
	}
	failJob := -1
	_, fails := sub.Extra["fail_at"]
	_, flaky := sub.Extra["flaky_at"]
	if fails || flaky {
		f, _ := sub.Extra.Number("fail_job")
		failJob = int(f)
	}
	objs := make([]Object, n)
	for i := range objs {
		cfg := queue.JobConfig{Profile: sub.Profile, Submitter: sub.Submitter, PayloadURL: sub.PayloadURL}
		if sub.Type != "" {
			cfg.Extra.Set("type", sub.Type)
		}
		if i == failJob {
			for _, k := range []string{"fail_at", "flaky_at", "flaky_times"} {
				if v, ok := sub.Extra[k]; ok {
					cfg.Extra.Set(k, v)
				}
			}
		}
		objs[i] = Object{Key: fmt.Sprintf("obj-%06d", i), Spec: queue.JobSpec{Priority: queue.DefaultPriority, Config: cfg}}
	}
	return objs, nil
}

// CreatePace is the submission's "create_pace" duration ("200ms"): its jobs
// are made in tens with that pause after each.
func (p PassThrough) CreatePace(b *queue.Batch) time.Duration {
	pace, _ := time.ParseDuration(b.Submission.Extra.String("create_pace"))
	return pace
}

// Takes tells whether a payload is a pass-through one: a pass-through
// daemon on a shared queue leaves real work alone.
func (p PassThrough) Takes(payloadURL string) bool {
	return strings.HasPrefix(payloadURL, PassThroughScheme)
}

// Report does nothing: the reactor publishes every report as an event.
func (p PassThrough) Report(context.Context, *queue.Batch, Report) error { return nil }
