package reactor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// PassThroughScheme is the payload URL scheme of pass-through batches:
// "passthrough:N" makes N jobs.
const PassThroughScheme = "passthrough:"

// PassThrough is a pipeline that does no work, for tests and benchmarks of
// the reactor itself: every step succeeds after Delay. A job whose
// configuration has "fail_at": "<State>" fails fatally in that state.
type PassThrough struct {
	Delay time.Duration
}

// Handlers returns a handler for every job state from Estimating to Notify.
func (p PassThrough) Handlers() map[queue.State]JobHandler {
	hs := map[queue.State]JobHandler{}
	for _, s := range JobStates[1:] {
		hs[s] = JobHandlerFunc(func(ctx context.Context, j *queue.Job) (Result, error) {
			if at, _ := j.Config["fail_at"].(string); at == string(s) {
				return Result{}, Fatal(fmt.Errorf("pass-through failure asked for in %s", s))
			}
			if p.Delay > 0 && !sleep(ctx, p.Delay) {
				return Result{}, ctx.Err()
			}
			return Result{}, nil
		})
	}
	return hs
}

// CreateJobs makes N jobs for a "passthrough:N" payload. A "fail_at" in the
// submission is passed to the job whose number is "fail_job" (default 0).
func (p PassThrough) CreateJobs(ctx context.Context, q *queue.Queue, b *queue.Batch) error {
	url, _ := b.Submission["payload_url"].(string)
	n, err := strconv.Atoi(strings.TrimPrefix(url, PassThroughScheme))
	if !strings.HasPrefix(url, PassThroughScheme) || err != nil || n < 0 {
		return Fatal(fmt.Errorf("payload_url %q: the pass-through pipeline takes %sN", url, PassThroughScheme))
	}
	failJob := -1
	if _, ok := b.Submission["fail_at"]; ok {
		f, _ := b.Submission["fail_job"].(float64)
		failJob = int(f)
	}
	objs := make([]Object, n)
	for i := range objs {
		cfg := map[string]any{}
		for _, k := range []string{"profile_name", "submitter", "payload_url", "type"} {
			if v, ok := b.Submission[k]; ok {
				cfg[k] = v
			}
		}
		if i == failJob {
			cfg["fail_at"] = b.Submission["fail_at"]
		}
		objs[i] = Object{Key: fmt.Sprintf("obj-%06d", i), Spec: queue.JobSpec{Priority: queue.DefaultPriority, Config: cfg}}
	}
	_, err = EnsureJobs(ctx, q, b, objs)
	return err
}

// Report does nothing: the reactor publishes every report as an event.
func (p PassThrough) Report(context.Context, *queue.Batch, Report) error { return nil }
