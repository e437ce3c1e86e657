package queue

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is the layout of last_modified, as the deployed library writes it.
const TimeLayout = "2006-01-02 15:04:05 -0700"

// TextTime is how a time reads in text meant for people, whoever writes
// it (the CLI, ops' sentences, a stalled reason): local, to the second
// (decision 260).
func TextTime(t time.Time) string { return t.Local().Format(time.DateTime) }

// NodeTime reads a time a node keeps as text: a last_modified in Merritt's
// layout (TimeLayout, in its writer's zone), or an access token's RFC 3339.
func NodeTime(s string) (time.Time, bool) {
	for _, layout := range []string{TimeLayout, time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// JSONTime is a time a node keeps as text as JSON gives every time (the
// API, the CLI's -o json, the report callback): RFC 3339 in UTC (decision
// 249). A stamp that does not parse (a foreign writer's) is given as
// written; an empty one stays empty.
func JSONTime(s string) string {
	if t, ok := NodeTime(s); ok {
		return t.UTC().Format(time.RFC3339)
	}
	return s
}

// NodeText is a time a node keeps as text, worded for people (TextTime);
// a stamp that does not parse (a foreign writer's) is given as written.
func NodeText(s string) string {
	if t, ok := NodeTime(s); ok {
		return TextTime(t)
	}
	return s
}

// DefaultPriority is the priority of a job created without one.
const DefaultPriority = 5

// JobStatus is the JSON of /jobs/<jid>/status.
type JobStatus struct {
	Status               State  `json:"status"`
	LastModified         string `json:"last_modified"`
	Message              string `json:"message"`
	LastSuccessfulStatus *State `json:"last_successful_status"`
	RetryCount           int    `json:"retry_count"`
	// Deferred, when set, is a wait of the job's step in its state that
	// every daemon honours, not only the one whose step waits (its
	// reactor.Result.Wait). ingestq's own: mrt-zk's readers ignore it. An
	// ingestq move drops it; mrt-zk's moves copy the status and keep it,
	// which is harmless: it is over within a minute of its write.
	Deferred *Deferral `json:"deferred,omitempty"`
	// Holder is the daemon that took the job in its state (its acquisition,
	// or its own move that kept the lock): ingestq's own, as Deferred. A
	// move that releases the lock drops it. Read by the next acquirer, it
	// tells a job taken from a daemon that lost it (Job.TakenFrom).
	Holder *JobHolder `json:"holder,omitempty"`
	// Move is the arrival ID (Job.ArrivalID) of the move that wrote this
	// status, when ingestq made it: ingestq's own, as Deferred. mrt-zk's
	// setStatus copies the key into its own moves' statuses unchanged,
	// where it no longer matches their arrival, so it tells an ingestq
	// move from another program's (Job.MovedByIngestq).
	Move string `json:"ingestq_move,omitempty"`
	// Extra holds the keys another writer added, written back by every
	// move as mrt-zk's setStatus keeps them.
	Extra Extra `json:"-"`
	// Mtime is when the node was last written, by ZooKeeper's clock to
	// the millisecond, as read (zero when not read from ZooKeeper).
	Mtime time.Time `json:"-"`
}

// UnmarshalJSON reads a job status, keeping other writers' keys in Extra.
func (s *JobStatus) UnmarshalJSON(data []byte) error {
	type plain JobStatus
	return decodeStatus(data, "JobStatus", (*plain)(s), &s.Extra)
}

// MarshalJSON writes the fields over Extra.
func (s JobStatus) MarshalJSON() ([]byte, error) {
	type plain JobStatus
	return encodeRecord(plain(s), s.Extra)
}

// JobHolder is a daemon holding a job: its host name and ZooKeeper session.
type JobHolder struct {
	Host    string `json:"host"`
	Session int64  `json:"session"`
	// Version is the status version its acquisition wrote: a change
	// fenced on the version before that one never landed (applied), even
	// once the holder has moved the job on.
	Version int32 `json:"version,omitempty"`
}

// same tells whether h and o name one session of one host.
func (h JobHolder) same(o JobHolder) bool { return h.Host == o.Host && h.Session == o.Session }

// Deferral is a job's step, or a Pending batch's, deferred until a time (a
// depositor's busy server asked for it) by the daemon of Host, which takes
// it first: a job's files downloaded meanwhile are there.
type Deferral struct {
	Until time.Time `json:"until"`
	Host  string    `json:"host"`
}

// MovedAt is when the move that wrote this status was made, as precisely
// as known (see movedAt).
func (s JobStatus) MovedAt() time.Time { return movedAt(s.LastModified, s.Mtime) }

// BatchStatus is the JSON of /batches/<bid>/status and /access/<q>/<qid>/status.
type BatchStatus struct {
	Status       State  `json:"status"`
	LastModified string `json:"last_modified"`
	Message      string `json:"message"`
	// Deferred is as JobStatus's, for a Pending batch whose payload server
	// is busy: every daemon passes over the batch until then.
	Deferred *Deferral `json:"deferred,omitempty"`
	// Holder is, in an access request's status, the daemon assembling it
	// (its acquisition, kept by its move to Processing), as JobStatus's;
	// a batch's names none.
	Holder *JobHolder `json:"holder,omitempty"`
	// Extra and Mtime are as JobStatus's.
	Extra Extra     `json:"-"`
	Mtime time.Time `json:"-"`
}

// UnmarshalJSON reads a batch or access status, keeping other writers' keys in Extra.
func (s *BatchStatus) UnmarshalJSON(data []byte) error {
	type plain BatchStatus
	return decodeStatus(data, "BatchStatus", (*plain)(s), &s.Extra)
}

// MarshalJSON writes the fields over Extra.
func (s BatchStatus) MarshalJSON() ([]byte, error) {
	type plain BatchStatus
	return encodeRecord(plain(s), s.Extra)
}

// MovedAt is when the move that wrote this status was made, as precisely
// as known (see movedAt).
func (s BatchStatus) MovedAt() time.Time { return movedAt(s.LastModified, s.Mtime) }

// movedAt is a move's time: its last_modified stamp, which keeps seconds,
// made precise by the node's mtime when that falls within the stamp's
// second. Otherwise the node was written again since (an acquisition, a
// checkpoint), or the writer's and ZooKeeper's clocks disagree, and the
// stamp's second is all that is known. Zero when the stamp does not parse.
func movedAt(lastModified string, mtime time.Time) time.Time {
	at, err := time.Parse(TimeLayout, lastModified)
	if err != nil {
		return time.Time{}
	}
	if d := mtime.Sub(at); !mtime.IsZero() && d >= 0 && d < time.Second {
		return mtime.UTC()
	}
	return at.UTC()
}

// Identifiers is the JSON of /jobs/<jid>/identifiers.
type Identifiers struct {
	PrimaryID string   `json:"primary_id"`
	LocalIDs  []string `json:"local_id"`
}

// MarshalJSON writes local_id as a list, [] when there is none: mrt-zk's
// Job.localId() casts it to a JSONArray and mrt-ingest's JSONUtil reads it
// with getJSONArray, so a null made Merritt's batch report throw.
func (ids Identifiers) MarshalJSON() ([]byte, error) {
	type plain Identifiers
	if ids.LocalIDs == nil {
		ids.LocalIDs = []string{}
	}
	return json.Marshal(plain(ids))
}

// Metadata is the JSON of /jobs/<jid>/metadata: the ERC kernel fields.
type Metadata struct {
	Who   string `json:"erc_who"`
	What  string `json:"erc_what"`
	When  string `json:"erc_when"`
	Where string `json:"erc_where"`
}

// StepManifest is the JSON of /jobs/<jid>/store and /jobs/<jid>/inventory.
type StepManifest struct {
	ManifestURL string  `json:"manifest_url"`
	Mode        string  `json:"mode"`
	Delete      *string `json:"delete,omitempty"`
	// Copies lists where the stored version's verified copies are, the
	// primary first (ingestq's own field, in the store node).
	Copies []string `json:"copies,omitempty"`
	// Unchanged says that the deposit changed nothing (ingestq's own field,
	// in the inventory node, written by Recording): the object's Version
	// already held its content, from an earlier deposit, and no version was
	// made.
	Unchanged bool `json:"unchanged,omitempty"`
	Version   int  `json:"version,omitempty"`
}

// StatusReport is the JSON of /batches/<bid>/status-report. Its first three
// fields are mrt-zk's; the others are ingestq's own, added after them and
// left out when empty, so that Merritt's readers read the node as before.
type StatusReport struct {
	LastModified   string   `json:"last_modified"`
	SuccessfulJobs []string `json:"successful_jobs"`
	FailedJobs     []string `json:"failed_jobs"`
	// Identified gives the object of each job of SuccessfulJobs (its ARK
	// and local ids), Failures each failed job's reason (its message, cut
	// at 1,000 bytes), and FailedObjects each failed job's object (its
	// local ids, and its ARK once one was given), so that a depositor knows
	// which object to fix and send again, as the report's event does. Each
	// stops at a budget of bytes (a node holds 1 MB); the jobs left out are
	// counted in the LeftOut fields, and their jobs still give them. A
	// windowed batch's archived jobs are in none of these, as in
	// SuccessfulJobs: its archive keeps their identifiers.
	Identified           map[string]*Identifiers `json:"objects,omitempty"`
	ObjectsLeftOut       int                     `json:"objects_left_out,omitempty"`
	Failures             map[string]string       `json:"failures,omitempty"`
	FailuresLeftOut      int                     `json:"failures_left_out,omitempty"`
	FailedObjects        map[string]*Identifiers `json:"failed_objects,omitempty"`
	FailedObjectsLeftOut int                     `json:"failed_objects_left_out,omitempty"`
}

// Job is one object's way through the pipeline, as read from ZooKeeper.
type Job struct {
	ID          string
	BatchID     string
	Priority    int
	SpaceNeeded int64
	Config      JobConfig
	Status      JobStatus
	Identifiers *Identifiers
	Metadata    *Metadata
	Store       *StepManifest
	Inventory   *StepManifest
	Locked      bool      // someone holds /jobs/<jid>/lock (as read)
	Created     time.Time // when /jobs/<jid> was created (ZooKeeper's clock)
	// LockSession is the session holding the lock (its ephemeral owner),
	// and LockedAt when it was taken, when Locked.
	LockSession int64
	LockedAt    time.Time
	// TakenFrom, on a view this session acquired, is the holder the
	// job's status named then, when another host or session
	// (JobStatus.Holder): that daemon, or this host's earlier session,
	// took the job in this state and did not move it on. Whether it let
	// go or lost it, its host node tells (Queue.LiveHost).
	TakenFrom *JobHolder

	ref     string // its ref's name under /jobs/states/<state>, "05-jid…"
	version int32  // version of the status node this view was read at
	owner   bool   // this Queue's session took the lock
	// lockMade is the zxid of the lock's creation: an acquisition's, known
	// from its multi() (commitLanded); an admin's (a create whose reply
	// holds no zxid), read by the load that follows it in the item's turn
	// (lockToLoad); else learnt by the first try of its unlock (releaseOwn).
	// Known, even a first try leaves a lock of this session made since
	// (after an expiry of the session that made this one, or another
	// admin's, taken while an unlock without a turn read the marks).
	lockMade int64
}

// State is the job's current status.
func (j *Job) State() State { return j.Status.Status }

// ArrivalID names the move that brought the job to its state; the event of
// that move carries it as its ID, so that a daemon can tell whether the
// stream has it (decision 131). It comes from what only a move writes in
// the status node (the state, last_modified, retry_count), so it stays the
// same while the job waits, is acquired and checkpoints; two moves to one
// state within a second (by operator actions) share it.
func (j *Job) ArrivalID() string { return arrivalID(j.ID, j.Status) }

func arrivalID(jid string, st JobStatus) string {
	return fmt.Sprintf("%s.%s.%s.%d", jid, strings.ToLower(string(st.Status)), stampDigits(st.LastModified), st.RetryCount)
}

// MovedByIngestq tells whether the move that brought j to its state was
// ingestq's: its status carries that move's own arrival ID (JobStatus.Move).
func (j *Job) MovedByIngestq() bool { return j.Status.Move == j.ArrivalID() }

// stampDigits is a last_modified stamp's digits, for an ID.
func stampDigits(stamp string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, stamp)
}

// Profile is configuration.profile_name, or "" when there is none.
func (j *Job) Profile() string { return j.Config.Profile }

// Ref is the name of its ref under /jobs/states/<state>.
func (j *Job) Ref() string { return j.ref }

// Batch is a depositor's submission, as read from ZooKeeper.
type Batch struct {
	ID         string
	Submission Submission
	Status     BatchStatus
	// Arrival is the status as read from ZooKeeper; Status moves on with
	// this session's own writes (an acquisition that moves the batch).
	Arrival  BatchStatus
	Report   *StatusReport
	Acquired bool // has a `states` child: no longer pending for mrt-zk
	Locked   bool
	// LockSession is the session holding the lock (its ephemeral owner),
	// when Locked.
	LockSession int64
	// JobCount is how many jobs the batch handler made (its job-count
	// node, written with the move to Processing), or -1 when not recorded
	// (a batch whose jobs another library made).
	JobCount int

	version  int32
	owner    bool
	lockHere bool  // the lock, as read, is this session's
	lockMade int64 // as Job's
}

// State is the batch's current status.
func (b *Batch) State() State { return b.Status.Status }

// ArrivalID names the move that brought the batch to its state, as
// Job.ArrivalID does a job's: its event carries it (decision 222).
func (b *Batch) ArrivalID() string {
	return fmt.Sprintf("%s.%s.%s", b.ID, strings.ToLower(string(b.State())), stampDigits(b.Status.LastModified))
}

// UUID is submission.batchID, the batch's public key.
func (b *Batch) UUID() string { return b.Submission.BatchUUID }

// Profile is submission.profile_name (or Merritt's "profile"), or "".
func (b *Batch) Profile() string { return b.Submission.Profile }

// merrittNames maps the names Merritt's ingest service (CDLUC3/mrt-ingest,
// handlers/batchProcess/HandlerSubmit.java) gives the fields of a batch's
// submission and of a job's configuration to the names ingestq reads.
var merrittNames = map[string]string{
	"profile":      "profile_name",
	"responseForm": "response_type",
	"filename":     "file_name",
	"size":         "file_size",
	"digestType":   "hash_algorithm",
	"digestValue":  "hash_value",
	"objectID":     "primary_id",
	"localID":      "local_id",
	"creator":      "erc_who",
	"title":        "erc_what",
	"date":         "erc_when",
}

// merrittTypes are the package types Merritt stores for its batch
// manifests (utility/PackageTypeEnum.java); ingestq reads any checkm
// manifest as "manifest" and goes by its #%profile.
var merrittTypes = map[string]string{"batchManifest": "manifest", "batchManifestFile": "manifest", "batchManifestContainer": "manifest"}

// fromMerritt adds to a submission or configuration, as read, ingestq's
// name of every field that only Merritt's name holds, so that every reader
// understands both forms. Merritt writes 0 and "" for "not given": those are
// not copied, and do not hide the other name's value. Nothing is written
// back to ZooKeeper.
func fromMerritt(m map[string]json.RawMessage) {
	given := func(v json.RawMessage) bool {
		s := strings.TrimSpace(string(v))
		return s != "" && s != "null" && s != `""` && s != "0"
	}
	for theirs, ours := range merrittNames {
		v := m[theirs]
		if !given(v) || given(m[ours]) {
			continue
		}
		var s string
		if theirs == "digestType" && json.Unmarshal(v, &s) == nil {
			v = mustJSON(strings.ReplaceAll(strings.ToLower(s), "-", "")) // "SHA-256" → "sha256"
		}
		m[ours] = v
	}
	var t string
	if json.Unmarshal(m["type"], &t) == nil && merrittTypes[t] != "" {
		m["type"] = mustJSON(merrittTypes[t])
	}
}

func (q *Queue) stamp() string { return q.now().Format(TimeLayout) }

// stampAt is at as last_modified, or now when at is zero.
func (q *Queue) stampAt(at time.Time) string {
	if at.IsZero() {
		return q.stamp()
	}
	return at.Format(TimeLayout)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("queue: cannot encode %T: %v", v, err)) // only our own types get here
	}
	return b
}

// decodeJSON reads a JSON node into v, naming the node on failure.
func decodeJSON(path string, data []byte, v any) error {
	if len(data) == 0 {
		return corrupt(path, "empty, want JSON")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return corrupt(path, "bad JSON: %v", err)
	}
	return nil
}

func decodeInt(path string, data []byte) (int64, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, corrupt(path, "want a decimal number, have %q", truncate(s, 40))
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// decodeJobStatus reads and validates a job status node.
func decodeJobStatus(path string, data []byte) (JobStatus, error) {
	var st JobStatus
	if err := decodeJSON(path, data, &st); err != nil {
		return st, err
	}
	if st.Status == "" {
		return st, corrupt(path, "no \"status\" field")
	}
	if !JobMachine.Known(st.Status) {
		return st, corrupt(path, "unknown job state %q (known: %s)", st.Status, joinStates(JobMachine.States))
	}
	if st.LastSuccessfulStatus != nil && !JobMachine.Known(*st.LastSuccessfulStatus) {
		return st, corrupt(path, "unknown last_successful_status %q", *st.LastSuccessfulStatus)
	}
	return st, nil
}

func decodeBatchStatus(m *Machine, path string, data []byte) (BatchStatus, error) {
	var st BatchStatus
	if err := decodeJSON(path, data, &st); err != nil {
		return st, err
	}
	if st.Status == "" {
		return st, corrupt(path, "no \"status\" field")
	}
	if !m.Known(st.Status) {
		return st, corrupt(path, "unknown %s state %q (known: %s)", m.Kind, st.Status, joinStates(m.States))
	}
	return st, nil
}

// checkPriority enforces the range the PP in a ref name can hold.
func checkPriority(p int) error {
	if p < 0 || p > 99 {
		return fmt.Errorf("priority %d is outside 0..99", p)
	}
	return nil
}

// refName is the name of a job's ref: two-digit priority, dash, jid.
func refName(priority int, jid string) string { return fmt.Sprintf("%02d-%s", priority, jid) }

// parseRef splits "05-jid0000000001" into priority and jid.
func parseRef(name string) (int, string, bool) {
	pp, jid, ok := strings.Cut(name, "-")
	if !ok || len(pp) != 2 || !strings.HasPrefix(jid, "jid") {
		return 0, "", false
	}
	p, err := strconv.Atoi(pp)
	if err != nil {
		return 0, "", false
	}
	return p, jid, true
}

// SplitLocalIDs splits a depositor's "a;b" local id list.
func SplitLocalIDs(s string) []string {
	var out []string
	for _, id := range strings.Split(s, ";") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}
