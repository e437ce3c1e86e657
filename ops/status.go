package ops

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// BatchStatus is how a batch stands: its state, its jobs per state, how
// far it is by jobs and by bytes, an estimate of the time left, and its
// report once it has one.
type BatchStatus struct {
	BID          string              `json:"bid"`
	UUID         string              `json:"uuid"`
	State        queue.State         `json:"state"`
	Message      string              `json:"message"`
	LastModified string              `json:"last_modified"`
	Profile      string              `json:"profile"`
	Locked       bool                `json:"locked"`
	Submission   map[string]any      `json:"submission"`
	Jobs         JobCounts           `json:"jobs"`
	Bytes        ByteCounts          `json:"bytes"`
	Percent      Percent             `json:"percent_complete"`
	ETA          *ETA                `json:"eta"` // null when unknown or done
	Report       *queue.StatusReport `json:"report"`
}

// JobCounts counts a batch's jobs: all, those finished (Completed, Failed
// or Deleted), and per state.
type JobCounts struct {
	Total    int                 `json:"total"`
	Finished int                 `json:"finished"`
	ByState  map[queue.State]int `json:"by_state"`
}

// ByteCounts sums the jobs' estimates (space_needed): of all, and of those
// finished; Done adds those of the jobs past Downloading, and the bytes
// running downloads have fetched so far (as their progress events said:
// the daemon's API and dashboard follow them). Unknown counts the jobs
// whose size is not known yet.
type ByteCounts struct {
	Total    int64 `json:"total"`
	Finished int64 `json:"finished"`
	Done     int64 `json:"done"`
	Unknown  int   `json:"unknown_jobs"`
}

// Percent is how far a batch is: by jobs, and by bytes done (null while a
// job's size is unknown).
type Percent struct {
	Jobs  *float64 `json:"jobs"`
	Bytes *float64 `json:"bytes"`
}

// BatchStatus reads how a batch stands. It reads the batch, its buckets,
// the status of each job still in the pipeline and the size of each job.
func (s *Service) BatchStatus(ctx context.Context, id string) (*BatchStatus, error) {
	b, err := s.FindBatch(ctx, id)
	if err != nil {
		return nil, err
	}
	buckets, err := s.Q.BatchJobs(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	working := buckets[queue.BucketProcessing]
	statuses, err := s.Q.JobStatuses(ctx, working)
	if err != nil {
		return nil, err
	}
	var all []string
	for _, bucket := range queue.Buckets {
		all = append(all, buckets[bucket]...)
	}
	sizes, err := s.Q.SpaceNeeded(ctx, all)
	if err != nil {
		return nil, err
	}
	// A windowed batch (decision 174) has archived jobs, done, and objects
	// without a job yet: its job-count counts them all.
	archived, err := s.Q.Archived(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	st := &BatchStatus{BID: b.ID, UUID: b.UUID(), State: b.State(), Message: b.Status.Message,
		LastModified: b.Status.LastModified, Profile: b.Profile(), Locked: b.Locked,
		Submission: b.Submission.Map(), Report: b.Report}
	st.Jobs = JobCounts{Total: max(len(all)+archived, b.JobCount), ByState: map[queue.State]int{}}
	for _, jid := range working {
		if js, ok := statuses[jid]; ok {
			st.Jobs.ByState[js.Status]++
		}
	}
	finished := map[string]bool{}
	for bucket, state := range map[string]queue.State{"batch-completed": queue.Completed, "batch-failed": queue.Failed, "batch-deleted": queue.Deleted} {
		if n := len(buckets[bucket]); n > 0 {
			st.Jobs.ByState[state] = n
		}
		for _, jid := range buckets[bucket] {
			finished[jid] = true
		}
	}
	st.Jobs.Finished = len(finished) + archived
	if archived > 0 {
		st.Jobs.ByState[queue.Completed] += archived
	}
	st.Bytes.Unknown += st.Jobs.Total - len(all) - archived // not made yet
	for _, jid := range all {
		n := sizes[jid]
		st.Bytes.Total += n
		state := statuses[jid].Status
		switch {
		case finished[jid]:
			st.Bytes.Finished += n
			st.Bytes.Done += n
		case pastDownload(state):
			st.Bytes.Done += n
		case state == queue.Downloading:
			got, _ := s.Pace.Downloaded(jid)
			st.Bytes.Done += min(got, max(n, 0)) // n is an estimate
		}
		if n <= 0 && !finished[jid] {
			st.Bytes.Unknown++
		}
	}
	st.Percent.Jobs = percent(int64(st.Jobs.Finished), int64(st.Jobs.Total))
	if st.Bytes.Unknown == 0 && archived == 0 { // an archived job's size is not kept
		st.Percent.Bytes = percent(st.Bytes.Done, st.Bytes.Total)
	}
	if slices.Contains([]queue.State{queue.Processing, queue.UpdateReporting}, b.State()) {
		deferred, nextTry := latestNextTry(statuses)
		st.ETA = s.Pace.BatchETA(st.Jobs.Total-st.Jobs.Finished, deferred, nextTry)
	}
	return st, nil
}

// latestNextTry is how many of the jobs whose statuses these are wait for
// a busy server still, and the latest of their next tries: from the
// statuses the batch's view reads anyway, none more.
func latestNextTry(statuses map[string]queue.JobStatus) (deferred int, latest time.Time) {
	now := time.Now()
	for _, js := range statuses {
		if d := js.Deferred; d != nil && d.Until.After(now) {
			deferred++
			if d.Until.After(latest) {
				latest = d.Until
			}
		}
	}
	return deferred, latest
}

// pastDownload tells whether a job in state s has downloaded its bytes:
// it is in a step after Downloading.
func pastDownload(s queue.State) bool {
	for n, ok := nextStep(queue.Downloading); ok; n, ok = nextStep(n) {
		if n == s {
			return true
		}
	}
	return false
}

// percent is part of whole in percent, to one decimal; nil for no whole.
func percent(part, whole int64) *float64 {
	if whole <= 0 {
		return nil
	}
	p := math.Round(float64(part)/float64(whole)*1000) / 10
	return &p
}

// Place is where a job waits: its position in its state's queue (1 is
// taken first; the jobs being worked on count too) of how many.
type Place struct {
	State    queue.State `json:"state"`
	Position int         `json:"position"`
	Of       int         `json:"of"`
}

// PlaceOf finds a job in its state's queue, in the order daemons take
// them (priority, then age): nil for a job that waits in no queue (Held,
// Failed, done) or is not listed where its state says.
func (s *Service) PlaceOf(ctx context.Context, j *queue.Job) (*Place, error) {
	if j.State() == queue.Held || done(j.State()) {
		return nil, nil
	}
	refs, _, err := s.Q.Refs(ctx, j.State())
	if err != nil {
		return nil, err
	}
	i := slices.Index(refs, j.Ref())
	if i < 0 {
		return nil, nil
	}
	return &Place{State: j.State(), Position: i + 1, Of: len(refs)}, nil
}

// JobETA estimates when a job completes, from its place (nil: unknown).
func (s *Service) JobETA(j *queue.Job, place *Place) *ETA {
	if place == nil {
		return nil
	}
	var nextTry time.Time
	if d := j.Status.Deferred; d != nil {
		nextTry = d.Until
	}
	return s.Pace.JobETA(j.State(), place.Position, nextTry)
}
