package queue

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/internal/backoff"
	"golang.org/x/sync/errgroup"
)

// A windowed batch is one with more objects than a state folder should
// list (decision 174): its objects are kept in the batch, in chunks, and
// its jobs are made a window at a time as earlier ones finish; its
// Completed jobs are archived into the batch and their nodes removed.
// These nodes are ingestq's own, under the batch:
//
//	/batches/<bid>/feed                  Feed (JSON)
//	/batches/<bid>/objects/c<000000>     a chunk of objects (gzipped JSON)
//	/batches/<bid>/archive/<jid>+<n>     n archived jobs, the first <jid> (JSON)

// Object is one object of a batch, to become one job.
type Object struct {
	Key  string  `json:"key"` // unique within the batch: a manifest line, a file name
	Spec JobSpec `json:"spec"`
}

// Feed is how far a windowed batch's job making has come.
type Feed struct {
	Objects int `json:"objects"` // in all
	Chunk   int `json:"chunk"`   // objects per chunk (the last may hold fewer)
	Chunks  int `json:"chunks"`
	Made    int `json:"made"` // chunks whose jobs are all made, in order
	// Making is set while chunk Made's jobs are being made: a run after a
	// crash must first find which of them exist.
	Making bool `json:"making"`
	// Stopped says why no more jobs will be made (a cancel, too many
	// failures); the batch's job-count then counts only those made.
	Stopped string `json:"stopped,omitempty"`
	// NoteBytes counts the JSON of the notes the batch's archive holds.
	NoteBytes int `json:"note_bytes,omitempty"`
}

// Done tells whether the feed makes no more jobs.
func (f *Feed) Done() bool { return f.Made >= f.Chunks || f.Stopped != "" }

// ArchivedJob is what stays of an archived Completed job: enough for the
// batch's report.
type ArchivedJob struct {
	ID          string       `json:"jid"`
	Key         string       `json:"key"`
	Identifiers *Identifiers `json:"identifiers,omitempty"`
	// Note is the job's note (Note of its message) while the batch's
	// archive holds fewer than archivedNotesMax bytes of them; past that,
	// NoteLeftOut says it had one.
	Note        string `json:"note,omitempty"`
	NoteLeftOut bool   `json:"note_left_out,omitempty"`
}

// archivedNotesMax bounds the notes a batch's archive keeps, in bytes of
// JSON (Feed.NoteBytes counts them): the report gives no more than that
// of notes (the reactor's statusDetailBudget), and a group's multi()
// stays well under ZooKeeper's 1 MB with them, whatever the batch's size.
const archivedNotesMax = 256 << 10

// ArchivedNotes are a windowed batch's archived jobs' notes, by jid, and
// how many the archive left out.
type ArchivedNotes struct {
	Given   map[string]string
	LeftOut int
}

func (q *Queue) chunkPath(bid string, k int) string {
	return q.batchPath(bid, "objects", fmt.Sprintf("c%06d", k))
}

// maxChunkBytes keeps a multi() of object chunks under ZooKeeper's 1 MB
// request limit (jute.maxbuffer).
const maxChunkBytes = 600 << 10

// WriteObjects keeps a windowed batch's objects, chunk objects to a node,
// and its Feed at zero, fenced by b's version. Already written (a run after
// a crash), it returns the Feed as it is.
func (q *Queue) WriteObjects(ctx context.Context, b *Batch, objs []Object, chunk int) (*Feed, error) {
	if f, err := q.LoadFeed(ctx, b.ID); err != nil || f != nil {
		return f, err
	}
	f := &Feed{Objects: len(objs), Chunk: chunk, Chunks: (len(objs) + chunk - 1) / chunk}
	// Chunks a run cut short wrote already stay: the handler gives the same
	// objects each time.
	written, err := q.children(ctx, q.batchPath(b.ID, "objects"))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, err
	}
	var ops []op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		ops = append(ops, fenceCheck(q.batchPath(b.ID, "status"), b.version))
		err := q.commit(ctx, ops)
		ops, size = nil, 0
		return err
	}
	for k := range f.Chunks {
		if slices.Contains(written, path2name(q.chunkPath(b.ID, k))) {
			continue
		}
		data, err := gzipJSON(objs[k*chunk : min((k+1)*chunk, len(objs))])
		if err != nil {
			return nil, err
		}
		if len(data) > maxChunkBytes {
			return nil, fmt.Errorf("batch %s: object chunk %d is %d bytes compressed, more than a ZooKeeper node takes", b.ID, k, len(data))
		}
		if size+len(data) > maxChunkBytes {
			if err := flush(); err != nil {
				return nil, fmt.Errorf("batch %s: keep its objects: %w", b.ID, err)
			}
		}
		ops = append(ops, q.createIn(ctx, q.chunkPath(b.ID, k), data, q.batchPath(b.ID), "objects")...)
		size += len(data)
	}
	// The feed last: its presence says every chunk is there.
	ops = append(ops, create(q.batchPath(b.ID, "feed"), mustJSON(f)))
	if err := flush(); err != nil {
		return nil, fmt.Errorf("batch %s: keep its objects: %w", b.ID, err)
	}
	return f, nil
}

// LoadFeed reads a batch's Feed: nil when the batch is not windowed.
func (q *Queue) LoadFeed(ctx context.Context, bid string) (*Feed, error) {
	data, _, err := q.get(ctx, q.batchPath(bid, "feed"))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f := new(Feed)
	if err := decodeJSON(q.rel(q.batchPath(bid, "feed")), data, f); err != nil {
		return nil, err
	}
	return f, nil
}

// SetFeed records a windowed batch's progress, fenced by b's version.
func (q *Queue) SetFeed(ctx context.Context, b *Batch, f *Feed) error {
	return q.commit(ctx, []op{set(q.batchPath(b.ID, "feed"), mustJSON(f), -1), fenceCheck(q.batchPath(b.ID, "status"), b.version)})
}

// ObjectChunk reads chunk k of a windowed batch's objects.
func (q *Queue) ObjectChunk(ctx context.Context, bid string, k int) ([]Object, error) {
	p := q.chunkPath(bid, k)
	data, _, err := q.get(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", q.rel(p), err)
	}
	var objs []Object
	if err := gunzipJSON(data, &objs); err != nil {
		return nil, fmt.Errorf("%s: %w", q.rel(p), err)
	}
	return objs, nil
}

// ArchiveJobs records Completed jobs of batch b (by jid) in one archive
// node and removes their nodes, their refs and their batch refs, in one
// multi(), fenced by b's version and each job's status version: a reader
// sees each job either whole or archived, never half gone.
func (q *Queue) ArchiveJobs(ctx context.Context, b *Batch, jids []string) error {
	if len(jids) == 0 {
		return nil
	}
	type seen struct {
		kids    []string
		version int32
		prio    int
		entry   ArchivedJob
	}
	got := make([]seen, len(jids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, jid := range jids {
		g.Go(func() error {
			kids, err := q.children(gctx, q.jobPath(jid))
			if err != nil {
				return fmt.Errorf("job %s: %w", jid, err)
			}
			r := q.getAll(gctx, q.jobPath(jid, "status"), q.jobPath(jid, "configuration"), q.jobPath(jid, "identifiers"), q.jobPath(jid, "priority"))
			if r[0].err != nil || r[1].err != nil {
				return fmt.Errorf("job %s: read its status and configuration: %w", jid, errors.Join(r[0].err, r[1].err))
			}
			st, err := decodeJobStatus(q.rel(q.jobPath(jid, "status")), r[0].data)
			if err != nil {
				return err
			}
			if st.Status != Completed {
				return fmt.Errorf("job %s is %s, not Completed: not archived", jid, st.Status)
			}
			e := ArchivedJob{ID: jid, Note: Note(st.Message)}
			var cfg JobConfig
			if err := decodeJSON(q.rel(q.jobPath(jid, "configuration")), r[1].data, &cfg); err != nil {
				return err
			}
			e.Key = cfg.ObjectKey
			if r[2].err == nil {
				e.Identifiers = new(Identifiers)
				if err := decodeJSON(q.rel(q.jobPath(jid, "identifiers")), r[2].data, e.Identifiers); err != nil {
					return err
				}
			}
			prio := DefaultPriority
			if r[3].err == nil {
				if n, err := strconv.Atoi(strings.TrimSpace(string(r[3].data))); err == nil {
					prio = n
				}
			}
			got[i] = seen{kids: kids, version: r[0].stat.Version, prio: prio, entry: e}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("batch %s: archive jobs: %w", b.ID, err)
	}
	entries := make([]ArchivedJob, len(jids))
	for i := range got {
		entries[i] = got[i].entry
	}
	ops, err := q.keepNotes(ctx, b.ID, entries)
	if err != nil {
		return fmt.Errorf("batch %s: archive jobs: %w", b.ID, err)
	}
	ops = append(ops, fenceCheck(q.batchPath(b.ID, "status"), b.version))
	for i, jid := range jids {
		ops = append(ops, fenceCheck(q.jobPath(jid, "status"), got[i].version))
		for _, c := range got[i].kids {
			ops = append(ops, del(q.jobPath(jid, c)))
		}
		ops = append(ops, del(q.jobPath(jid)), q.delRef(Completed, refName(got[i].prio, jid), jid),
			del(q.batchPath(b.ID, "states", Bucket(Completed), jid)))
	}
	name := fmt.Sprintf("%s+%d", jids[0], len(jids))
	ops = append(ops, q.createIn(ctx, q.batchPath(b.ID, "archive", name), mustJSON(entries), q.batchPath(b.ID), "archive")...)
	if err := q.commit(ctx, ops); err != nil {
		return fmt.Errorf("batch %s: archive %d jobs from %s: %w", b.ID, len(jids), jids[0], err)
	}
	return nil
}

// keepNotes leaves in entries, in order, the notes that the batch's archive
// has room for (archivedNotesMax), marking the others left out, and gives
// the op that counts them in its Feed, fenced by the Feed's version. A
// batch with no Feed (none is archived) keeps none.
func (q *Queue) keepNotes(ctx context.Context, bid string, entries []ArchivedJob) ([]op, error) {
	p := q.batchPath(bid, "feed")
	data, stat, err := q.get(ctx, p)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, err
	}
	f := new(Feed)
	if err != nil {
		f.NoteBytes = archivedNotesMax // no Feed: no room
	} else if err := decodeJSON(q.rel(p), data, f); err != nil {
		return nil, err
	}
	was := f.NoteBytes
	for i := range entries {
		e := &entries[i]
		if e.Note == "" {
			continue
		}
		if n := len(mustJSON(e.Note)); f.NoteBytes+n <= archivedNotesMax {
			f.NoteBytes += n
		} else {
			e.Note, e.NoteLeftOut = "", true
		}
	}
	if f.NoteBytes == was {
		return nil, nil
	}
	return []op{set(p, mustJSON(f), stat.Version)}, nil
}

// Archived counts a batch's archived jobs (0 when it has none), from the
// archive nodes' names.
func (q *Queue) Archived(ctx context.Context, bid string) (int, error) {
	names, err := q.children(ctx, q.batchPath(bid, "archive"))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		_, count, _ := strings.Cut(name, "+")
		c, err := strconv.Atoi(count)
		if err != nil {
			return 0, fmt.Errorf("%s: not an archive node (want <jid>+<count>)", q.rel(q.batchPath(bid, "archive", name)))
		}
		n += c
	}
	return n, nil
}

// ArchivedJobs reads a batch's archived jobs, in jid order.
func (q *Queue) ArchivedJobs(ctx context.Context, bid string) ([]ArchivedJob, error) {
	dir := q.batchPath(bid, "archive")
	names, err := q.children(ctx, dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = dir + "/" + n
	}
	var out []ArchivedJob
	for i, r := range q.getAll(ctx, paths...) {
		if r.err != nil {
			return nil, fmt.Errorf("read %s: %w", q.rel(paths[i]), r.err)
		}
		var part []ArchivedJob
		if err := decodeJSON(q.rel(paths[i]), r.data, &part); err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	slices.SortFunc(out, func(a, b ArchivedJob) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func gzipJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gunzipJSON(data []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not gzipped JSON: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("not gzipped JSON: %w", err)
	}
	return json.Unmarshal(raw, v)
}

// AcquireFeed locks batch bid for making more of its jobs, if it is in
// Processing and unlocked; else it returns nil, with its lock to watch when
// another session holds it. As every acquisition, it moves the status
// version on, so a feeder that lost the lock makes no more jobs.
func (q *Queue) AcquireFeed(ctx context.Context, bid string) (*Batch, []Wait, error) {
	return q.acquireBatch(ctx, []string{bid}, []State{Processing}, nil, nil, nil, "")
}

// StopFeed records that a windowed batch makes no more jobs, and why, with
// its job-count set to the jobs it made, in one multi() fenced by b's
// version: its report then waits for those only.
func (q *Queue) StopFeed(ctx context.Context, b *Batch, f *Feed, why string) error {
	f.Stopped = why
	made := f.MadeObjects()
	err := q.commit(ctx, []op{set(q.batchPath(b.ID, "feed"), mustJSON(f), -1),
		upsert(q.batchPath(b.ID, "job-count"), []byte(strconv.Itoa(made)), b.JobCount >= 0),
		fenceCheck(q.batchPath(b.ID, "status"), b.version)})
	if err == nil {
		b.JobCount = made
	}
	return err
}

// MadeObjects is how many objects have their jobs made, by whole chunks.
func (f *Feed) MadeObjects() int { return min(f.Made*f.Chunk, f.Objects) }

// StopFeeding stops a windowed batch's job making for an operator (why):
// it waits for the batch's lock (a feeder making a chunk holds it until the
// chunk is made), then records the stop. A batch that is not windowed, or
// makes no more jobs, is left as it is.
func (q *Queue) StopFeeding(ctx context.Context, bid, why string) error {
	for attempt := 1; ; attempt++ {
		f, err := q.LoadFeed(ctx, bid)
		if err != nil || f == nil || f.Done() {
			return err
		}
		b, _, err := q.AcquireFeed(ctx, bid)
		if err != nil {
			return err
		}
		if b != nil {
			err := q.StopFeed(ctx, b, f, why)
			_ = q.UnlockBatch(ctx, b)
			return err
		}
		if st, err := q.BatchState(ctx, bid); err != nil || st != Processing {
			return err // not Processing: nothing feeds it
		}
		if !backoff.Sleep(ctx, backoff.Delay(50*time.Millisecond, time.Second, attempt)) {
			return fmt.Errorf("batch %s: stop making its jobs: its lock is held: %w", bid, ctx.Err())
		}
	}
}

// BucketCounts counts the jobs in each of a batch's buckets, by bucket name.
func (q *Queue) BucketCounts(ctx context.Context, bid string) (map[string]int, error) {
	return q.countChildren(ctx, Buckets, q.bucketPaths(bid))
}

// StateCounts counts the refs in each job state folder, by state.
func (q *Queue) StateCounts(ctx context.Context) (map[State]int, error) {
	names := make([]string, len(JobMachine.States))
	paths := make([]string, len(JobMachine.States))
	for i, s := range JobMachine.States {
		names[i], paths[i] = string(s), q.Path("/jobs/states/"+s.Folder())
	}
	byName, err := q.countChildren(ctx, names, paths)
	out := map[State]int{}
	for n, c := range byName {
		out[State(n)] = c
	}
	return out, err
}

// countChildren reads how many children each path has (0 when it is
// missing), by name.
func (q *Queue) countChildren(ctx context.Context, names, paths []string) (map[string]int, error) {
	out := map[string]int{}
	for i, r := range q.getAll(ctx, paths...) {
		switch {
		case r.err == nil:
			out[names[i]] = int(r.stat.NumChildren)
		case !errors.Is(r.err, zk.ErrNoNode):
			return nil, fmt.Errorf("count %s: %w", q.rel(paths[i]), r.err)
		}
	}
	return out, nil
}

// Successes lists a reported batch's successful jobs, in jid order, with
// their identifiers: those of its status-report and a windowed batch's
// archived jobs (which the status-report leaves out); and the archived
// jobs' notes (a live job's is in its status).
func (q *Queue) Successes(ctx context.Context, b *Batch) (jids []string, ids map[string]*Identifiers, notes ArchivedNotes, err error) {
	var live []string
	if b.Report != nil {
		live = b.Report.SuccessfulJobs
	}
	if ids, err = q.Identifiers(ctx, live); err != nil {
		return nil, nil, notes, err
	}
	archived, err := q.ArchivedJobs(ctx, b.ID)
	if err != nil {
		return nil, nil, notes, err
	}
	jids, notes.Given = slices.Clone(live), map[string]string{}
	for _, a := range archived {
		jids = append(jids, a.ID)
		if a.Identifiers != nil {
			ids[a.ID] = a.Identifiers
		}
		switch {
		case a.Note != "":
			notes.Given[a.ID] = a.Note
		case a.NoteLeftOut:
			notes.LeftOut++
		}
	}
	slices.Sort(jids)
	return jids, ids, notes, nil
}
