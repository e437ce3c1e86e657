package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// How submit --wait follows a batch. Variables, so that a test could shorten
// them; the defaults are what an operator gets.
var (
	waitPoll     = 2 * time.Second  // re-count the batch's jobs in ZooKeeper
	waitQuiet    = 10 * time.Second // no event for this long: read the batch's status from ZooKeeper
	waitDial     = 3 * time.Second  // connect timeout to the daemon's NATS
	progressStep = 5 * time.Second  // non-terminal progress: a line at least this far apart (besides each 10%)
	progressTick = 100 * time.Millisecond
)

type submitFlags struct {
	profile   string
	submitter string
	typ       string
	priority  int
	wait      bool
	set       []string
}

func (a *app) submitCommand() *cobra.Command {
	var f submitFlags
	var sub queue.Submission
	cmd := &cobra.Command{
		Use:   "submit --profile P [--submitter S] [--type T] [--priority N] [--set KEY=VALUE…] [--wait] URL|PATH",
		Short: "Submit a payload (a URL or a local file) as a batch for a profile",
		Long: "submit creates a Pending batch for a payload: a URL, or a local file (not a folder; made absolute;\n" +
			"it must exist; it becomes a file: URL, which only profiles allowing local files accept).\n" +
			"It prints the batch id (-o json: batch_id and uuid). The profile must be one a daemon\n" +
			"has published (ingestq serve publishes its profiles in ZooKeeper at start).\n\n" +
			"--type auto (the default) lets the daemon look at the payload: a checkm manifest (any of\n" +
			"Merritt's four profiles), a zip container, or else a single file (an empty payload, or one\n" +
			"named .checkm that is no manifest, fails: --type file stores it as a file).\n\n" +
			"--set KEY=VALUE (repeatable; VALUE as typed) gives what the depositor says of the one object\n" +
			"of a file or container payload, as the API's POST /batches does: local_id, primary_id (an ARK\n" +
			"to store it under), file_name, hash_algorithm and hash_value (checked as it downloads),\n" +
			"erc_who, erc_what (the title), erc_when, erc_where. A batch manifest's lines give these per\n" +
			"object instead.\n\n" +
			"--wait follows the batch on the daemon's NATS (--nats, default nats://127.0.0.1:4222):\n" +
			"progress on stderr, then the batch's report (each completed job with its object's ARK and\n" +
			"local ids, each failed job with its reason); exit 0 when it is Completed, 1 when it is\n" +
			"Failed, 3 when it is removed or stays unreadable for 3 reads (about 4 s) before it reports.\n" +
			"Ctrl-C stops waiting (exit 130), not the batch: it keeps running in the daemon.\n\n" +
			"passthrough:N, for a daemon run with serve --pipeline passthrough, makes N jobs that do\n" +
			"nothing and succeed at every step, to measure the queue alone (its --profile need not be\n" +
			"published).",
		Args: args("URL|PATH"),
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			sub, err = a.submission(f, cmd.Flags().Changed("priority"), args[0])
			return err
		},
		// Connected without making the queue's folders: a refused submission
		// writes nothing (a mistyped --zk-root stays an empty root that the
		// other commands name as one); submit makes them once it is accepted.
		RunE: a.run(a.queue, func(ctx context.Context, q *queue.Queue, _ []string) error {
			return a.submit(ctx, q, sub, f.wait)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.profile, "profile", "", "the profile (collection) the payload is for (required)")
	fl.StringVar(&f.submitter, "submitter", "", "who submits (default $USER)")
	fl.StringVar(&f.typ, "type", "auto", "what the payload is: "+strings.Join(ops.PayloadTypes, ", "))
	fl.IntVar(&f.priority, "priority", 0, "priority of the batch's jobs, 0..99, lower runs first (default: the profile's)")
	fl.BoolVar(&f.wait, "wait", false, "follow the batch until it reports (needs the daemon's NATS)")
	fl.StringArrayVar(&f.set, "set", nil, "a field of the submission, KEY=VALUE (local_id, primary_id, file_name, erc_what, …; see above)")
	return cmd
}

// submission checks the flags and the payload and builds the batch's
// submission (the service layer's checks); anything wrong is a usage
// error, found before connecting.
func (a *app) submission(f submitFlags, priority bool, payload string) (queue.Submission, error) {
	req := ops.SubmitRequest{Profile: f.profile, Submitter: f.submitter, PayloadURL: payload, Type: f.typ}
	if req.Submitter == "" {
		req.Submitter = a.user()
	}
	if priority {
		req.Priority = &f.priority
	}
	if payload == "" {
		return queue.Submission{}, usagef("submit: empty URL|PATH")
	}
	if err := ops.CheckSubmitRequest(req); err != nil {
		return queue.Submission{}, submitUsage(err)
	}
	var err error
	if req.PayloadURL, err = payloadURL(payload); err != nil {
		return queue.Submission{}, err
	}
	for _, kv := range f.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return queue.Submission{}, usagef("submit: --set %q: want key=value", kv)
		}
		if req.Fields == nil {
			req.Fields = map[string]any{}
		}
		req.Fields[k] = ops.SetValue(k, v)
	}
	// A local path (made a file: URL), to be stored under its own name:
	// an empty --set file_name= names none.
	if named, _ := req.Fields["file_name"].(string); req.PayloadURL != payload && named == "" {
		if err := checkStoredName(payload, f.typ); err != nil {
			return queue.Submission{}, err
		}
	}
	sub, err := ops.Submission(req)
	return sub, submitUsage(err)
}

// submitUsage makes the service layer's refusal of a submission a usage
// error (exit 2), naming a bad field by its flag.
func submitUsage(err error) error {
	var fe *ops.FieldError
	switch {
	case errors.As(err, &fe):
		return usagef("submit: %s", fe.Named(flagOf(fe.Field)))
	case errors.Is(err, ops.ErrInvalid):
		return &exitError{code: 2, err: err}
	}
	return err
}

// flagOf is the flag of a submission field, or its argument; a field with
// no flag of its own (primary_id, file_name, …) is given by --set.
func flagOf(field string) string {
	switch field {
	case "payload_url":
		return "URL|PATH"
	case "profile", "submitter", "type", "priority":
		return "--" + field
	}
	return "--set " + field
}

// payloadURL makes a local path an absolute file: URL; a URL (or a
// pass-through payload) stays as it is.
func payloadURL(payload string) (string, error) {
	if strings.Contains(payload, "://") || strings.HasPrefix(payload, reactor.PassThroughScheme) {
		return payload, nil
	}
	abs, err := filepath.Abs(payload)
	if err != nil {
		return "", usagef("submit: payload %q: %v", payload, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", usagef("submit: payload %q is not a URL, and no such local file: %v", payload, err)
	}
	if fi.IsDir() {
		return "", usagef("submit: payload %q is a folder: submit a file, a zip of the folder, or a manifest of its files", payload)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}

// checkStoredName refuses a local payload whose own name becomes the
// stored file's when intake refuses that name (ops.LocalNameRefused): its
// job would fail at Downloading. A name given with --set file_name is the
// stored one instead, checked with the submission's fields.
func checkStoredName(payload, typ string) error {
	name, refused := ops.LocalNameRefused(payload, typ)
	if refused == nil {
		return nil
	}
	return usagef("submit: payload %q: its name %q would be the stored file's, and intake refuses it: %v; "+
		"rename the file, or give the name to store it under with --set file_name=NAME", payload, name, refused)
}

func (a *app) submit(ctx context.Context, q *queue.Queue, sub queue.Submission, wait bool) error {
	if err := a.ops(q).CheckProfile(ctx, sub); err != nil {
		return submitUsage(err)
	}
	var msgs chan *nats.Msg
	if wait {
		// Listen before the batch exists, so that no event of it is missed.
		nc, err := a.dialNATS(waitDial)
		if err != nil {
			return fmt.Errorf("%s; --wait needs it: %v", a.natsWhy(err), err)
		}
		defer nc.Close()
		msgs = make(chan *nats.Msg, 1<<16)
		for _, subject := range []string{"ingestq.job.>", "ingestq.batch.>"} {
			if _, err := nc.ChanSubscribe(subject, msgs); err != nil {
				return fmt.Errorf("nats %s: subscribe %s: %w", a.natsShown(), subject, err)
			}
		}
		if err := nc.FlushTimeout(waitDial); err != nil {
			return fmt.Errorf("nats %s: subscribe: %w", a.natsShown(), err)
		}
	}
	if err := q.Init(ctx); err != nil {
		return fmt.Errorf("zookeeper %s: prepare queue folders under %q: %w", a.zk, a.root, err)
	}
	b, err := a.ops(q).Submit(ctx, sub)
	if err != nil {
		return submitUsage(err)
	}
	if !wait {
		if a.json() {
			return a.writeJSON(struct {
				BatchID string `json:"batch_id"`
				UUID    string `json:"uuid"`
			}{b.ID, b.UUID()})
		}
		a.println("%s", b.ID)
		return nil
	}
	if !a.json() {
		a.println("%s", b.ID)
	}
	return a.followBatch(ctx, q, b.ID, msgs)
}

// tally is what a waiting submit knows of its batch's jobs: each job's last
// known state (last state wins, so a requeued job that later completes is
// counted once), and the counts that follow from it.
type tally struct {
	total        int               // jobs in the batch; -1 until counted
	jobs         map[string]string // jid → its last known state
	done, failed int
	bytes        map[string]int64                     // jid → bytes downloaded, from progress events
	estimate     map[string]int64                     // jid → bytes it needs, from its estimate or its download (0 = unknown)
	waiting      map[queue.State]map[string]time.Time // of each roomStates: jid → since when it is there, as the events say
	busy         map[string]time.Time                 // jid → its next try (zero: not said), while it waits for a busy server

	// The download rate is measured from the first progress event to the
	// last one that brought more bytes.
	firstAt, lastAt       time.Time
	firstBytes, lastBytes int64
}

func newTally() *tally {
	t := &tally{total: -1, jobs: map[string]string{}, bytes: map[string]int64{}, estimate: map[string]int64{},
		waiting: map[queue.State]map[string]time.Time{}, busy: map[string]time.Time{}}
	for _, state := range roomStates {
		t.waiting[state] = map[string]time.Time{}
	}
	return t
}

// downloaded is the bytes the batch's jobs have downloaded so far.
func (t *tally) downloaded() int64 {
	var n int64
	for _, b := range t.bytes {
		n += b
	}
	return n
}

// sawEvent takes what a job event or a progress event says about bytes,
// and about a wait for a busy server (a move, another wait, or more bytes
// end it).
func (t *tally) sawEvent(ev events.Event, now time.Time) {
	if n, ok := ev.Attrs["space_needed"].(float64); ok && ev.Kind == events.KindJob {
		t.estimate[ev.JobID] = int64(n)
	}
	if ev.Kind != events.KindProgress {
		delete(t.busy, ev.JobID)
		return
	}
	if ev.Attrs["waiting"] == true {
		delete(t.busy, ev.JobID)
	}
	if waitsForBusyServerEvent(ev) {
		next, _ := ev.Attrs["next_try"].(string)
		t.busy[ev.JobID], _ = time.Parse(time.RFC3339, next) // zero when not said
	}
	if n, ok := ev.Attrs["bytes_total"].(float64); ok && n > 0 {
		t.estimate[ev.JobID] = int64(n)
	}
	n, ok := ev.Attrs["bytes_done"].(float64)
	if !ok {
		return // a wait's progress event (attrs.waiting): no download has begun, the rate's clock neither
	}
	if int64(n) > t.bytes[ev.JobID] {
		delete(t.busy, ev.JobID) // its server answered
	}
	t.bytes[ev.JobID] = int64(n)
	switch all := t.downloaded(); {
	case t.firstAt.IsZero():
		t.firstAt, t.firstBytes, t.lastAt, t.lastBytes = now, all, now, all
	case all > t.lastBytes:
		t.lastAt, t.lastBytes = now, all
	}
}

// waitsForBusyServerEvent tells whether ev is a job's progress event
// saying it waits for a busy server (handlers' sayWhyItWaits). Not the
// batch's own wait (no job): taken for a job's, it was noted as "job  of
// batch …"; onPoll says it from the batch's status.
func waitsForBusyServerEvent(ev events.Event) bool {
	return ev.Kind == events.KindProgress && ev.JobID != "" && ev.Attrs["waiting"] == true && strings.HasPrefix(ev.Message, stalled.BusyServerPrefix)
}

// progress is the numbers to show at now.
func (t *tally) progress(now time.Time) progress {
	done, failed, total := t.counts()
	n := progress{finished: done, failed: failed, total: total, bytes: t.downloaded(), at: now}
	if took := t.lastAt.Sub(t.firstAt); took >= time.Second {
		n.rate = float64(t.lastBytes-t.firstBytes) / took.Seconds()
	}
	for jid, next := range t.busy {
		if finished, _ := jobDone(t.jobs[jid]); !finished {
			n.busy++
			// A next try gone by is not said: a busy wait's event is the
			// first try's (one while the same file has the same answer), so
			// a later try's time is never heard, and the first's, past,
			// stood as "ETA after" it for as long as the job waited.
			if next.After(n.nextTry) && next.After(now) {
				n.nextTry = next // zero stays when none was said
			}
		}
	}
	// A failed or deleted job's size is what it downloaded: the rest never
	// will be (its estimate in the total left "293.7 KiB of 294.2 KiB" at
	// the end).
	sized := 0
	var sum int64
	for jid, state := range t.jobs {
		if downloadsNoMore(state) {
			sized++
			sum += t.bytes[jid]
		}
	}
	for jid, b := range t.estimate {
		if downloadsNoMore(t.jobs[jid]) {
			continue
		}
		if b <= 0 {
			return n // one unknown size: no total
		}
		sized++
		sum += b
	}
	if total > 0 && sized == total {
		n.bytesTotal = sum
	}
	return n
}

func jobDone(state string) (done, failed bool) {
	switch queue.State(state) {
	case queue.Failed:
		return true, true
	case queue.Completed, queue.Deleted:
		return true, false
	}
	return false, false
}

// downloadsNoMore tells whether a job in state ended short of its
// estimate's bytes: it failed, or was deleted (ingestq delete).
func downloadsNoMore(state string) bool {
	return queue.State(state) == queue.Failed || queue.State(state) == queue.Deleted
}

func (t *tally) set(jid, state string) {
	if done, failed := jobDone(t.jobs[jid]); done {
		t.done--
		if failed {
			t.failed--
		}
	}
	if done, failed := jobDone(state); done {
		t.done++
		if failed {
			t.failed++
		}
	}
	t.jobs[jid] = state
	if state == working {
		return // a recount knows no more than this: what the events said stands
	}
	for in, since := range t.waiting {
		if string(in) != state {
			delete(since, jid)
		} else if _, ok := since[jid]; !ok {
			since[jid] = time.Now()
		}
	}
}

// roomStates are the states in which the room rule may hold a job back:
// Provisioning for its estimate, Downloading for a zip's unpacked size.
var roomStates = []queue.State{queue.Provisioning, queue.Downloading}

// longestIn is the job that has been in state (one of roomStates) the
// longest, and since when; false when none is.
func (t *tally) longestIn(state queue.State) (jid string, since time.Time, ok bool) {
	for j, at := range t.waiting[state] {
		if !ok || at.Before(since) {
			jid, since, ok = j, at, true
		}
	}
	return jid, since, ok
}

// counts are the jobs done (failed included), those failed, and the jobs
// of the batch (-1 until counted).
func (t *tally) counts() (done, failed, total int) {
	if t.total >= 0 {
		t.total = max(t.total, len(t.jobs))
	}
	return t.done, t.failed, t.total
}

// working is a job's state as a recount has it: in the batch's
// batch-processing bucket, in some state short of the end.
const working = "working"

// recountBatch reads the batch's buckets: ZooKeeper is the truth, and what it
// says replaces what the events said (an event that is older than the read
// only arrives later and is overtaken again by the next one).
func (a *app) recountBatch(ctx context.Context, q *queue.Queue, bid string, t *tally) {
	buckets, err := q.BatchJobs(ctx, bid)
	if err != nil {
		a.log.Debug("submit --wait: cannot count the batch's jobs", "batch", bid, "err", err)
		return
	}
	state := map[string]string{
		"batch-processing": working, "batch-completed": string(queue.Completed),
		"batch-failed": string(queue.Failed), "batch-deleted": string(queue.Deleted),
	}
	// The buckets are read one after the other, in this order: a job that
	// moved on meanwhile may show in two, and the later read is the newer.
	for _, bucket := range queue.Buckets {
		for _, jid := range buckets[bucket] {
			t.set(jid, state[bucket])
		}
	}
	t.total = len(t.jobs)
}

// followBatch shows the batch's progress until it reports, then its report.
func (a *app) followBatch(ctx context.Context, q *queue.Queue, bid string, msgs <-chan *nats.Msg) error {
	f := &follower{a: a, q: q, bid: bid, t: newTally(), lastEvent: time.Now(), roomNoted: map[string]bool{},
		p: newProgressLine(a.stderr, isTerminal(a.stderr), bid)}
	defer a.logs.divert(f.p)() // logs go on their own lines, above the progress
	poll := time.NewTicker(waitPoll)
	defer poll.Stop()
	redraw := time.NewTicker(progressTick) // what a throttled redraw left out
	defer redraw.Stop()
	for {
		select {
		case <-ctx.Done():
			return f.stopped(ctx)
		case m := <-msgs:
			if to := f.onMessage(ctx, m); to != "" {
				return f.finish(ctx, to)
			}
		case <-poll.C:
			to, err := f.onPoll(ctx)
			if err != nil {
				f.p.end()
				return err
			}
			if to != "" {
				return f.finish(ctx, to)
			}
		case <-redraw.C:
			f.show(false)
		}
	}
}

// follower is followBatch's view of the batch.
type follower struct {
	a              *app
	q              *queue.Queue
	bid            string
	t              *tally
	p              *progressLine
	lastEvent      time.Time       // when the last event of the batch came
	counting       bool            // the batch has its jobs: count them
	roomNoted      map[string]bool // "state limit": the limits (--max-fill, --space-margin) said to hold jobs back there
	busyNoted      bool            // a job waiting for a busy server was said
	batchBusyNoted bool            // the batch waiting for its busy payload server was said
	misses         int             // reads in a row that found the batch gone or unreadable
}

func (f *follower) show(force bool) {
	now := time.Now()
	f.p.update(f.t.progress(now), now, force)
}

// onMessage takes an event of the batch; it returns the state the batch
// reported, once it has.
func (f *follower) onMessage(ctx context.Context, m *nats.Msg) (reported string) {
	var ev events.Event
	if json.Unmarshal(m.Data, &ev) != nil || ev.BatchID != f.bid {
		return ""
	}
	f.lastEvent = time.Now()
	f.t.sawEvent(ev, f.lastEvent)
	switch ev.Kind {
	case events.KindJob:
		f.t.set(ev.JobID, ev.To)
	case events.KindProgress:
		f.noteBusyServer(ev)
	case events.KindBatch:
		switch queue.State(ev.To) {
		case queue.Processing:
			f.counting = true
			f.a.recountBatch(ctx, f.q, f.bid, f.t)
		case queue.Completed, queue.Failed:
			return ev.To
		case queue.Held:
			// An operator's hold names its actor; a daemon holds a
			// batch only for its collection.
			why := "its collection is held"
			if ev.Actor != "" {
				why = "held by " + ev.Actor
			}
			f.a.note("batch %s is Held (%s): waiting until it is released", f.bid, why)
		}
	}
	f.show(false)
	return ""
}

// noteBusyServer says the first of the batch's jobs that waits for a busy
// server (its progress event says so): the depositor's own server, which
// may hold the batch up to --fetch-busy-limit. Once: a batch of a thousand
// objects on one busy server would say it a thousand times.
func (f *follower) noteBusyServer(ev events.Event) {
	if f.busyNoted || !waitsForBusyServerEvent(ev) {
		return
	}
	f.busyNoted = true
	f.a.note("job %s of batch %s is %s (its batch's other waits for a busy server are not said)", ev.JobID, f.bid, ev.Message)
}

// onPoll asks ZooKeeper how the batch stands after a while without news (a
// dropped connection, lost events), and recounts its jobs; it returns the
// state the batch reported, once it has, or why the wait ends without one
// (the batch is gone or unreadable).
func (f *follower) onPoll(ctx context.Context) (reported string, lost error) {
	// Before its jobs are made the batch itself is read each poll. Its
	// wait for a busy payload server has an event, but one for the same
	// wait, not one a try: an hour's wait is quiet after it, and the read
	// also finds within a poll a move to Processing whose event was lost.
	// A batch found gone or unreadable is read each poll until it is
	// readable again or waitMisses reads have found it so.
	if !f.counting || f.misses > 0 || time.Since(f.lastEvent) >= waitQuiet {
		b, err := f.q.LoadBatch(ctx, f.bid)
		if err == nil {
			f.misses = 0
		}
		switch {
		case errors.Is(err, queue.ErrNotFound) || errors.Is(err, queue.ErrCorrupt):
			if lost := f.missed(ctx, err); lost != nil {
				return "", lost
			}
		case err != nil: // ZooKeeper unreachable for now: its client connects again
			f.a.log.Debug("submit --wait: cannot read the batch", "batch", f.bid, "err", err)
		case b.State() == queue.Completed || b.State() == queue.Failed:
			return string(b.State()), nil
		case b.State() != queue.Pending && b.State() != queue.Held:
			f.counting = true
		case waitsForBusyServer(b) && !f.batchBusyNoted:
			f.batchBusyNoted = true
			f.a.note("batch %s is %s", b.ID, b.Status.Message)
		}
	}
	if f.counting {
		f.a.recountBatch(ctx, f.q, f.bid, f.t)
	}
	f.noteRoom(ctx)
	f.show(false)
	return "", nil
}

// waitMisses is how many reads in a row, a poll apart, may find the batch
// gone or unreadable before submit --wait ends: about (waitMisses-1) *
// waitPoll, 4 s by default. Another program rewriting the status (mrt-zk
// writes an item's nodes one by one) leaves it so for milliseconds; our own
// batch was made whole, so ErrCreating's 10 minutes (huskAge) would only
// keep a script waiting for a batch that is gone.
const waitMisses = 3

// exitBatchLost is submit --wait's exit code when the batch is removed or
// unreadable before it reports: its outcome is unknown, neither Completed
// (0) nor Failed (1).
const exitBatchLost = 3

// missed takes a read that found the batch gone or unreadable (err): the
// first says so on a note, the waitMisses-th in a row ends the wait. A
// batch gone that the recorded events say reported ends as its report
// (batchReport); else the wait names who may have removed it (as show
// does) or the node and what is wrong.
func (f *follower) missed(ctx context.Context, err error) error {
	f.misses++
	if f.misses < waitMisses {
		if f.misses == 1 {
			f.a.note("reading batch %s failed (%v); reading it again, %d times %s apart, in case another program is rewriting it",
				f.bid, err, waitMisses-1, waitPoll)
		}
		return nil
	}
	if errors.Is(err, queue.ErrNotFound) {
		if to := f.a.quietOps(f.q).BatchReported(ctx, f.bid); to != "" {
			return f.a.batchReport(ctx, f.q, f.bid, to) // its report event was lost on the way, not in the stream
		}
		err = f.a.removedOrNever(ctx, f.q, f.bid, err)
	} else {
		err = fmt.Errorf("batch %s cannot be read: %w", f.bid, err)
	}
	return &exitError{code: exitBatchLost, err: fmt.Errorf("stopped waiting, its outcome unknown: %w", err)}
}

// noteRoom says why the batch's jobs sit in Provisioning, or a zip in
// Downloading, when the daemon holds them back for room, once for each
// state and limit that holds them (again only after they all went on from
// that state). In each state it reads the status of the job that has been
// there longest, once it has been there a poll: one read a poll, and none
// while jobs pass through, as they do when there is room. A job found gone
// on (its event lost or overtaken) leaves the tally, and the next longest
// is read, up to roomReads a poll: jobs whose events a NATS reconnect lost
// would otherwise take a poll each before the one held. A job found there
// and not held for room (a download under way) is read again after the
// others: one downloading for hours does not hide a zip waiting behind it.
func (f *follower) noteRoom(ctx context.Context) {
	for _, state := range roomStates {
		f.noteRoomIn(ctx, state)
	}
}

func (f *follower) noteRoomIn(ctx context.Context, state queue.State) {
	for range roomReads {
		jid, since, ok := f.t.longestIn(state)
		if !ok {
			for limit := range f.roomNoted {
				if strings.HasPrefix(limit, string(state)+" ") {
					delete(f.roomNoted, limit)
				}
			}
			return
		}
		if time.Since(since) < waitPoll {
			return
		}
		st, _, err := f.q.JobStatusOf(ctx, jid)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			f.t.set(jid, string(queue.Deleted))
			continue
		case err != nil:
			f.a.log.Debug("submit --wait: cannot read a job in "+string(state), "job", jid, "err", err)
			return
		case st.Status != state: // the event that moved it on was lost or overtaken
			f.t.set(jid, string(st.Status))
			continue
		}
		f.a.log.Debug("submit --wait: the job longest in "+string(state), "job", jid, "since", since, "message", st.Message)
		if !f.noteLimit(state, jid, st.Message) {
			f.t.waiting[state][jid] = time.Now() // read again after the others
		}
		return
	}
}

// roomReads bounds noteRoom's reads in one poll of a state, which holds
// up the events.
const roomReads = 16

// noteLimit writes the note for the limit that message, of job jid in
// state, names, the first time it holds jobs there back; false when the
// message is not the room rule's.
func (f *follower) noteLimit(state queue.State, jid, message string) bool {
	limit := handlers.RoomLimit(message)
	if limit == "" {
		return false
	}
	if key := string(state) + " " + limit; !f.roomNoted[key] {
		f.roomNoted[key] = true
		if state == queue.Downloading {
			// Jobs downloading are there too: only the one read is known
			// to wait.
			f.a.note("job %s of batch %s waits in Downloading to unpack its zip: %s; %s", jid, f.bid, message, roomAdvice[limit])
			return true
		}
		n, verb := len(f.t.waiting[state]), "wait"
		if n == 1 {
			verb = "waits"
		}
		f.a.note("%s of batch %s %s in %s: %s; %s", plural(n, "job"), f.bid, verb, state, message, roomAdvice[limit])
	}
	return true
}

// roomAdvice is what lets jobs on that a limit holds back.
var roomAdvice = map[string]string{
	"--max-fill":     "free some space on the daemon's working storage, or raise its --max-fill (1: only --space-margin holds a job back)",
	"--space-margin": "free some space on the daemon's working storage (it keeps --space-margin free beyond each job's estimate)",
}

// finish shows the final count and the report of the batch, which
// reported to.
func (f *follower) finish(ctx context.Context, to string) error {
	f.a.recountBatch(ctx, f.q, f.bid, f.t)
	f.show(true)
	f.p.end()
	return f.a.batchReport(ctx, f.q, f.bid, to)
}

// stopped ends the progress when the user stops waiting.
func (f *follower) stopped(ctx context.Context) error {
	f.p.end()
	if f.counting {
		f.a.recountBatch(ctx, f.q, f.bid, f.t)
	}
	return f.a.stoppedWaiting(ctx, f.q, f.bid, f.t)
}

// stoppedWaiting says where the batch stands when the user stops waiting
// (Ctrl-C): exit 130, as for any command a SIGINT ends.
func (a *app) stoppedWaiting(ctx context.Context, q *queue.Queue, bid string, t *tally) error {
	state, fate := "in an unknown state", "it keeps running in the daemon"
	// ctx has ended (that is why we stopped): one last read on its own clock.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if b, err := q.LoadBatch(ctx, bid); err == nil {
		state = "is " + string(b.State())
		if b.State() == queue.Held {
			fate = "it stays Held until released (ingestq release)"
		}
	}
	return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped waiting: batch %s %s, %s; %s (ingestq show %s)",
		bid, state, t.progress(time.Now()).jobs(), fate, bid)}
}

// exitInterrupted is the exit code of a command stopped by Ctrl-C: 128 + SIGINT.
const exitInterrupted = 130

// batchReport prints a finished batch's report, as ZooKeeper has it; the
// exit code follows to, the state the batch reported.
func (a *app) batchReport(ctx context.Context, q *queue.Queue, bid, to string) error {
	b, err := q.LoadBatch(ctx, bid)
	if err != nil {
		removed := errors.Is(err, queue.ErrNotFound)
		err = fmt.Errorf("batch %s reported %s, but its report cannot be read: %w", bid, to, a.removedOrNever(ctx, q, bid, err))
		if removed && to == string(queue.Completed) {
			// Removed once it reported (cleanup --older-than 0, Merritt's
			// sweep): its outcome is known, and the exit code follows it.
			return &exitError{code: 0, err: err}
		}
		return err
	}
	// object is a job's object: its local ids, and its ARK once one was
	// given; a failed job's too (which object to fix and send again).
	type object struct {
		JID      string   `json:"jid"`
		ARK      string   `json:"ark"`
		LocalIDs []string `json:"local_id"`
	}
	objectOf := func(jid string, id *queue.Identifiers) object {
		o := object{JID: jid, LocalIDs: []string{}}
		if id != nil {
			o.ARK, o.LocalIDs = id.PrimaryID, append(o.LocalIDs, id.LocalIDs...)
		}
		return o
	}
	type failedJob struct {
		object
		Message string `json:"message"`
	}
	successful, failed, objects := []string{}, []failedJob{}, []object{}
	if b.Report != nil {
		jids, ids, _, err := q.Successes(ctx, b)
		successful = append(successful, jids...)
		if err != nil {
			return fmt.Errorf("batch %s reported %s, but its jobs' identifiers cannot be read: %w", bid, to, err)
		}
		for _, jid := range successful {
			objects = append(objects, objectOf(jid, ids[jid]))
		}
		for _, jid := range b.Report.FailedJobs {
			id, msg := b.Report.FailedObjects[jid], ""
			if j, err := q.LoadJob(ctx, jid); err != nil {
				msg = "(cannot read the job: " + err.Error() + ")"
			} else {
				msg, id = j.Status.Message, cmp.Or(j.Identifiers, id)
			}
			failed = append(failed, failedJob{objectOf(jid, id), msg})
		}
	}
	if a.json() {
		err = a.writeJSON(struct {
			BatchID        string      `json:"batch_id"`
			UUID           string      `json:"uuid"`
			Status         queue.State `json:"status"`
			Message        string      `json:"message"`
			SuccessfulJobs []string    `json:"successful_jobs"`
			Objects        []object    `json:"objects"`
			FailedJobs     []failedJob `json:"failed_jobs"`
		}{b.ID, b.UUID(), b.State(), b.Status.Message, successful, objects, failed})
		if err != nil {
			return err
		}
	} else {
		a.println("batch %s (uuid %s) %s", b.ID, b.UUID(), b.State())
		if b.Status.Message != "" {
			a.println("  message:         %s", oneLine(b.Status.Message))
		}
		a.println("  successful jobs: %d", len(successful))
		const most = 50 // a report of 100,000 objects is for -o json or ingestq ls jobs
		for _, o := range objects[:min(len(objects), most)] {
			a.println("    %s  %s", o.JID, describeObject(&queue.Identifiers{PrimaryID: o.ARK, LocalIDs: o.LocalIDs}))
		}
		if len(objects) > most {
			a.println("    … and %d more (ingestq ls jobs --batch %s)", len(objects)-most, b.ID)
		}
		a.println("  failed jobs:     %d", len(failed))
		for _, f := range failed {
			a.println("    %s  %s  %s", f.JID, describeObject(&queue.Identifiers{PrimaryID: f.ARK, LocalIDs: f.LocalIDs}), textValue(oneLine(f.Message), "-"))
		}
	}
	if to == string(queue.Completed) {
		return nil
	}
	why := fmt.Sprintf("%d of %s failed", len(failed), plural(len(successful)+len(failed), "job"))
	if len(failed) == 0 && b.Status.Message != "" {
		why = oneLine(b.Status.Message)
	}
	return &exitError{code: 1, err: fmt.Errorf("batch %s Failed: %s", b.ID, why)}
}
