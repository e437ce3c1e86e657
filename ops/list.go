package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/reactor/queue"
)

// Page asks for part of a listing: at most Limit items (0: all) after the
// item whose cursor is After ("" from the start). A listing gives the
// cursor of its last item as Next while more may follow.
type Page struct {
	Limit int
	After string
	// Reverse lists from the end: batches newest first (the dashboard).
	Reverse bool
}

// JobFilter selects jobs; an empty field selects all.
type JobFilter struct {
	State   queue.State
	Batch   string // a bid (see Service.BatchID)
	Profile string
	LocalID string
	ARK     string
	// Keep, when set, must also pass a job (a test the caller adds, such
	// as the API's stalled filter).
	Keep func(*queue.Job) bool
}

// JobList is a page of jobs. By state they are in the state's queue order
// (priority, then age); otherwise in creation order. Problems are the jobs
// that could not be read, left out.
type JobList struct {
	Jobs     []*queue.Job
	Next     string
	Problems []error
}

// loadChunk is how many jobs a listing reads at once; minChunk the fewest
// it reads at once near the end of a page.
const (
	loadChunk = 64
	minChunk  = 16
)

// ListJobs lists the jobs that pass f, a page at a time. The candidates
// come from the cheapest listing that holds them all (the state's folder,
// the batch's buckets, or every job), and only those the page needs are
// read.
func (s *Service) ListJobs(ctx context.Context, f JobFilter, p Page) (JobList, error) {
	keys, jidOf, problems, err := s.jobCandidates(ctx, f)
	if err != nil {
		return JobList{}, err
	}
	out := JobList{Problems: problems}
	keep := func(key string, j *queue.Job, err error) bool {
		switch {
		case err == nil:
			return f.keeps(j)
		case errors.Is(err, queue.ErrNotFound) && f.State != "":
			out.Problems = append(out.Problems, &queue.CorruptError{
				Path: "/jobs/states/" + f.State.Folder() + "/" + key, Reason: "ref without a job"})
		case !errors.Is(err, queue.ErrNotFound): // a job deleted while listing is no problem
			out.Problems = append(out.Problems, err)
		}
		return false
	}
	load := func(key string) (*queue.Job, error) { return s.Q.LoadJob(ctx, jidOf(key)) }
	out.Jobs, out.Next = paginate(keys, p, load, keep)
	return out, nil
}

// paginate reads the items of the sorted keys after p.After, a chunk at a
// time, keeping those keep says, until it has p.Limit (0: all). next is the
// last item's key, as listed, when keys remain: an item's own idea of its
// key (a job's ref by its priority) may sort elsewhere than where it is.
func paginate[T any](keys []string, p Page, load func(key string) (T, error), keep func(key string, item T, err error) bool) (items []T, next string) {
	switch {
	case p.Reverse:
		if p.After != "" {
			keys = keys[:sort.SearchStrings(keys, p.After)]
		}
		keys = slices.Clone(keys)
		slices.Reverse(keys)
	default:
		keys = keys[sort.SearchStrings(keys, p.After):]
		if len(keys) > 0 && keys[0] == p.After {
			keys = keys[1:]
		}
	}
	items = []T{}
	for len(keys) > 0 {
		size := loadChunk
		if p.Limit > 0 { // read no more than the page may need (a few more when keep drops some)
			size = min(size, max(p.Limit-len(items), minChunk))
		}
		chunk := keys[:min(len(keys), size)]
		loaded, errs := loadAll(chunk, load)
		for i, item := range loaded {
			if p.Limit > 0 && len(items) == p.Limit {
				return items, next
			}
			if keep(chunk[i], item, errs[i]) {
				items, next = append(items, item), chunk[i]
			}
		}
		keys = keys[len(chunk):]
		if p.Limit > 0 && len(items) == p.Limit && len(keys) > 0 {
			return items, next
		}
	}
	return items, ""
}

// loadAll reads the item of each key, 32 at a time.
func loadAll[T any](keys []string, load func(key string) (T, error)) ([]T, []error) {
	out := make([]T, len(keys))
	errs := make([]error, len(keys))
	var g errgroup.Group
	g.SetLimit(32)
	for i, k := range keys {
		g.Go(func() error { out[i], errs[i] = load(k); return nil })
	}
	_ = g.Wait() // the errors are in errs
	return out, errs
}

// keeps tells whether a job read passes the filter.
func (f JobFilter) keeps(j *queue.Job) bool {
	return (f.Batch == "" || j.BatchID == f.Batch) &&
		(f.Profile == "" || j.Profile() == f.Profile) &&
		(f.LocalID == "" || slices.Contains(LocalIDs(j), f.LocalID)) &&
		(f.ARK == "" || ARK(j) == f.ARK) &&
		(f.Keep == nil || f.Keep(j))
}

// jobCandidates lists, sorted, the keys of the jobs f may select (ref
// names by state, else jids), with each key's jid.
func (s *Service) jobCandidates(ctx context.Context, f JobFilter) (keys []string, jidOf func(string) string, problems []error, err error) {
	var inBatch map[string]bool
	if f.Batch != "" {
		buckets, err := s.Q.BatchJobs(ctx, f.Batch)
		if err != nil {
			return nil, nil, nil, err
		}
		inBatch = map[string]bool{}
		for _, jids := range buckets {
			for _, jid := range jids {
				inBatch[jid] = true
				keys = append(keys, jid)
			}
		}
	}
	if f.State == "" {
		if f.Batch == "" {
			keys, err = s.Q.JobIDs(ctx)
		}
		slices.Sort(keys)
		return keys, func(k string) string { return k }, nil, err
	}
	refs, problems, err := s.Q.Refs(ctx, f.State)
	if err != nil {
		return nil, nil, nil, err
	}
	jidOf = func(ref string) string { _, jid, _ := strings.Cut(ref, "-"); return jid }
	if inBatch != nil {
		refs = slices.DeleteFunc(refs, func(r string) bool { return !inBatch[jidOf(r)] })
	}
	return refs, jidOf, problems, nil // Refs sorts them
}

// ARK is the job's object's ARK, or "".
func ARK(j *queue.Job) string {
	if j.Identifiers == nil {
		return ""
	}
	return j.Identifiers.PrimaryID
}

// LocalIDs are the job's object's local ids (never nil).
func LocalIDs(j *queue.Job) []string {
	if j.Identifiers == nil || j.Identifiers.LocalIDs == nil {
		return []string{}
	}
	return j.Identifiers.LocalIDs
}

// Title is the job's object's title (erc_what), or "".
func Title(j *queue.Job) string {
	if j.Metadata == nil {
		return ""
	}
	return j.Metadata.What
}

// JobRow is a job in a listing.
type JobRow struct {
	JID          string      `json:"jid"`
	BID          string      `json:"bid"`
	Status       queue.State `json:"status"`
	Priority     int         `json:"priority"`
	Profile      string      `json:"profile"`
	RetryCount   int         `json:"retry_count"` // requeues by an operator (mrt-zk's retry_count), not the step's attempts
	Message      string      `json:"message"`
	Locked       bool        `json:"locked"`
	LastModified string      `json:"last_modified"`
	ARK          string      `json:"ark"`
	LocalIDs     []string    `json:"local_id"`
	Title        string      `json:"title"`
	// StepAttempts is the reactor's retries of the current step; null
	// unless it is being retried.
	StepAttempts *StepAttempts `json:"step_attempts"`
	// LockedBy names who holds the lock (Situation.LockedBy);
	// Hold why a Held job is held. Empty (left out) when not known or none.
	LockedBy string `json:"locked_by,omitempty"`
	Hold     string `json:"hold,omitempty"`
}

// Row is the job's listing row, from its nodes alone (Service.Rows adds
// who holds its lock and why it is held).
func Row(j *queue.Job) JobRow {
	return JobRow{JID: j.ID, BID: j.BatchID, Status: j.State(), Priority: j.Priority, Profile: j.Profile(),
		RetryCount: j.Status.RetryCount, Message: j.Status.Message, Locked: j.Locked, LastModified: j.Status.LastModified,
		ARK: ARK(j), LocalIDs: LocalIDs(j), Title: Title(j), StepAttempts: AttemptsOf(j)}
}

// FindJob reads a job by its jid, or by its object's ARK: the newest job of
// that object (depositing it again makes another); others are the ids of
// every job with that ARK, when there are several.
func (s *Service) FindJob(ctx context.Context, id string) (j *queue.Job, others []string, problems []error, err error) {
	if !strings.HasPrefix(id, "ark:") {
		if err := checkID(id, "jid", "job"); err != nil {
			return nil, nil, nil, err
		}
		j, err := s.Q.LoadJob(ctx, id)
		return j, nil, nil, err
	}
	list, err := s.ListJobs(ctx, JobFilter{ARK: id}, Page{})
	if err != nil {
		return nil, nil, nil, err
	}
	if len(list.Jobs) == 0 {
		return nil, nil, list.Problems, fmt.Errorf("job with ARK %s: %w", id, queue.ErrNotFound)
	}
	if len(list.Jobs) > 1 {
		for _, j := range list.Jobs {
			others = append(others, j.ID)
		}
	}
	return list.Jobs[len(list.Jobs)-1], others, list.Problems, nil // in creation order
}
