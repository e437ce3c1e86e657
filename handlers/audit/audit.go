// Package audit compares every object the daemon's inventory records, and
// each object its profiles' own inventories record of them, with each
// storage target of its profile and, with fixity, reads every stored byte
// again. Storing compares version numbers only (README "Backups and
// recovery"): after storage or the inventory was restored from a backup,
// the audit finds which objects lost versions, files or bytes, and where.
//
// The walk reads each inventory a page at a time, merged in ARK order,
// audits a few objects at once, and reports each object's findings in ARK
// order, with the counts at least every Options.Every in between. A target
// that fails is a finding of the object audited there; only an
// inventory's listing failing, the report's receiver failing, or the
// context ends the walk.
//
// With Options.Record an audit with fixity leaves its evidence in the
// inventory: a PREMIS fixity check event of each version at each target
// (record.go). With Options.Repair it records, from the primary target,
// the versions storage holds and the inventory lost (repair.go).
package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage"
)

// Inventory is what the audit reads of an inventory, and where it
// records its fixity checks (Options.Record).
type Inventory interface {
	inventory.Lister
	Object(ctx context.Context, ark string) (inventory.ObjectDetail, error)
	Record(ctx context.Context, r inventory.Record) error
}

// Own is an inventory that profiles name as their own.
type Own struct {
	Name      string // in errors: "the inventory of profile a"
	Inventory Inventory
	Profiles  []string // the profiles that record into it
}

// source is an inventory the audit walks, and which of its objects.
type source struct {
	name string
	inv  Inventory
	all  bool     // every object (the daemon's inventory)
	of   []string // else only the objects of these profiles
}

func (s source) holds(profile string) bool { return s.all || slices.Contains(s.of, profile) }

// sources are the inventories walked: the daemon's first, then the
// profiles' own in the Auditor's order. Each object's findings come in
// this order when one ARK is in several.
func (a *Auditor) sources() []*source {
	out := []*source{{name: daemons, inv: a.Inventory, all: true}}
	for _, o := range a.Own {
		out = append(out, &source{name: o.Name, inv: o.Inventory, of: o.Profiles})
	}
	return out
}

// holder is an inventory that records an object, with its row there.
type holder struct {
	*source
	row inventory.ObjectRow
}

// recordedTwice is the finding of an ARK that several inventories record
// (hs, in the walk's order): Recording writes each version into one.
func (a *Auditor) recordedTwice(ark string, hs []holder) Finding {
	var where []string
	profiles := map[string]bool{}
	for _, h := range hs {
		where = append(where, fmt.Sprintf("%s (profile %q, %s)", h.name, h.row.Profile, versionsText(1, h.row.LatestVersion)))
		profiles[h.row.Profile] = true
	}
	why := "the records name different profiles: deposits of two profiles took one ARK"
	if p := hs[0].row.Profile; len(profiles) == 1 {
		why = fmt.Sprintf("profile %q records each new version into %s alone, so the other record gets none and falls "+
			"behind (it was made before the profile named an inventory of its own, or by a daemon whose profile "+
			"records there)", p, a.recordsInto(p))
	}
	return Finding{Kind: RecordedTwice, ARK: ark, Message: fmt.Sprintf("%s is recorded in %s: %s; compare the records "+
		"(`ingestq object %s --inventory URL`, with each inventory's URL), keep the one its profile records into, and "+
		"remove the other with its database's own tools (ingestq removes no record)",
		ark, strings.Join(where, " and in "), why, ark)}
}

// recordsInto names the inventory that profile's Recording writes to: its
// own (Own.Profiles), else the daemon's.
func (a *Auditor) recordsInto(profile string) string {
	for _, o := range a.Own {
		if slices.Contains(o.Profiles, profile) {
			return o.Name
		}
	}
	return daemons
}

// daemons names the daemon's inventory in findings and errors.
const daemons = "the inventory"

// Target is one storage target of a profile.
type Target struct {
	Name  string        // the URL as the profile names it, any password redacted: what findings show
	URL   string        // the URL itself; an error's text that quotes it is shown with Name instead
	Store storage.Store // nil when Err is set
	Err   error         // the target could not be opened: a finding of every object there
}

// Auditor audits the objects of the daemon's inventory and of its
// profiles' own inventories.
type Auditor struct {
	Inventory Inventory // the daemon's: each object it records is audited
	// Own are the profiles' own inventories (profile field inventory),
	// each once. From each, only the objects of the profiles that record
	// into it are audited: other daemons' profiles may record there too.
	Own []Own
	// Targets gives a profile's storage targets, the primary first. An
	// error (a profile this daemon does not know) is a finding of each of
	// the profile's objects. A walk asks it once per profile.
	Targets func(ctx context.Context, profile string) ([]Target, error)
	// Agent names who checks, in the PREMIS events Options.Record writes:
	// the pipeline's agent ("ingestq v1.2.3 on host1").
	Agent string
	// Profiles are the daemon's profiles. A walk (not Options.ARKs) lists
	// each of their storage targets that can name its objects
	// (storage.Lister), and an object stored there that no inventory
	// records is an object-unrecorded finding: an inventory restored older
	// than storage loses whole objects, which a walk of the inventory
	// alone never meets.
	Profiles []string
	// FromStorage is the record of version v of an object as stored
	// (Options.Repair): its files, and what the deposit wrote into it (the
	// job and batch of its message, its local ids and ERC); the walk adds
	// the profile, the copies and the repair's event.
	FromStorage func(ctx context.Context, stored storage.Stored, v storage.Version) (inventory.Record, error)
	// IngestHeld tells whether the ingest queue is held: Options.Repair is
	// refused otherwise (ErrNotHeld).
	IngestHeld func(ctx context.Context) (bool, error)

	listings keptListings // for the part of a split walk that continues
}

// Options choose what an audit reads.
type Options struct {
	Fixity bool // read every stored file of every recorded version and hash it
	// Record writes a PREMIS fixity check event into the inventory for each
	// version hashed at each target, and for each recorded version a
	// target lacks (record.go). Only with Fixity.
	Record bool
	// Repair records, for each object-unrecorded and versions-unrecorded
	// finding, the versions the primary target of the object's profile
	// holds (repair.go); only while the ingest queue is held.
	Repair bool
	After  string   // start after this ARK ("" from the first)
	Limit  int      // audit at most this many objects; 0: all
	ARKs   []string // audit only these (After and Limit then must be unset)
	// Parallel is how many objects are audited at once; default 4.
	Parallel int
	// Every is the longest time between two reports of the counts;
	// default 10 s (the daemon's HTTP server cuts an answer quiet for a
	// minute, and a client shows progress).
	Every time.Duration
}

// Defaults are the options a zero field takes.
var Defaults = Options{Parallel: 4, Every: 10 * time.Second}

// pageSize is how many objects one listing of the inventory asks for.
const pageSize = 100

// Counts are how far an audit went.
type Counts struct {
	Objects   int   `json:"objects"`    // objects audited
	Versions  int   `json:"versions"`   // their versions the inventory records
	Files     int   `json:"files"`      // the files of those versions
	BytesRead int64 `json:"bytes_read"` // read back from storage to hash (fixity), over every target
	Findings  int   `json:"findings"`
	// NotRecorded are the ARKs asked for that the inventory does not hold:
	// each a not-recorded finding (among Findings), and no object audited.
	NotRecorded int `json:"not_recorded"`
	// EventsRecorded are the fixity check events written (Options.Record).
	EventsRecorded int `json:"events_recorded"`
	// Repaired are the versions recorded from storage (Options.Repair).
	Repaired int    `json:"repaired"`
	Last     string `json:"last,omitempty"` // the last ARK audited: Options.After continues from it
}

// Summary is an audit's end.
type Summary struct {
	Counts
	// More says Limit ended the walk before the inventory's last object:
	// Options.After = Last continues it.
	More bool `json:"more"`
	// Notes say what could not be audited everywhere: a storage service
	// target that serves each object's latest version alone, audited at
	// that version.
	Notes []string `json:"notes"`
}

// Report receives what an audit finds, on the goroutine of Run. An error
// it returns (its client went away) ends the audit with that error.
type Report struct {
	Finding  func(Finding) error
	Progress func(Counts) error // the counts so far, at least every Options.Every
	Repaired func(Repaired) error
}

// audited is one object's audit: started in ARK order, reported in it.
type audited struct {
	ark        string
	src        *source // where it is recorded; nil: look for it (Options.ARKs)
	findings   []Finding
	versions   int
	files      int
	latestOnly []string // the targets audited at their latest version alone
	events     int      // fixity check events recorded (Options.Record)
	unknown    bool     // the inventory holds no such object: a NotRecorded finding, not counted as audited
	// unrecordedAt are the targets that hold the object when no inventory
	// records it: an ObjectUnrecorded finding at each, not counted as
	// audited.
	unrecordedAt []Target
	// primaryOf are the profiles whose primary target holds an unrecorded
	// object: the one its repair records it as.
	primaryOf []string
	repaired  []Repaired // versions recorded from storage (Options.Repair)
	// repairTried says the repair ran: a version it could not record is
	// not tried again when the compare after it finds it unrecorded.
	repairTried bool
	done        chan struct{}
}

// walk is one run of the audit.
type walk struct {
	a     *Auditor
	srcs  []*source // the inventories, a.sources() once
	opt   Options
	rep   Report
	bytes atomic.Int64 // read back so far, by every worker
	n     Counts       // Run's goroutine only
	notes []string
	noted map[string]bool // targets with a note: Run's goroutine only
	// listNotes name the targets that could not be listed, or whose
	// listing an earlier part left; lists are the targets listed: start's
	// goroutine only, read once it has ended.
	listNotes []string
	lists     []*storedList
	// recordings go to the recorder (Options.Record).
	recordings chan *recording

	mu       sync.Mutex
	profiles map[string]*profileTargets // by profile name
}

// profileTargets are a profile's targets, asked of Auditor.Targets once a
// walk: a target that cannot be opened is not opened again for each of its
// objects (an open that times out would hold every object up).
type profileTargets struct {
	once    sync.Once
	targets []Target
	err     error
}

// targets gives profile's targets, asking Auditor.Targets the first time.
func (w *walk) targets(ctx context.Context, profile string) ([]Target, error) {
	w.mu.Lock()
	p, ok := w.profiles[profile]
	if !ok {
		p = &profileTargets{}
		w.profiles[profile] = p
	}
	w.mu.Unlock()
	p.once.Do(func() { p.targets, p.err = w.a.Targets(ctx, profile) })
	return p.targets, p.err
}

// Run audits the objects opt chooses, reporting as it goes.
func (a *Auditor) Run(ctx context.Context, opt Options, rep Report) (Summary, error) {
	if err := opt.Check(); err != nil {
		return Summary{}, err
	}
	if (opt.Record || opt.Repair) && a.Agent == "" {
		return Summary{}, fmt.Errorf("audit: %w: record or repair with no agent: the auditor must name who checks", inventory.ErrInvalid)
	}
	if err := a.CheckRepair(ctx, opt); err != nil {
		return Summary{}, err
	}
	opt.Parallel = cmp.Or(opt.Parallel, Defaults.Parallel)
	opt.Every = cmp.Or(opt.Every, Defaults.Every)
	if rep.Finding == nil {
		rep.Finding = func(Finding) error { return nil }
	}
	if rep.Progress == nil {
		rep.Progress = func(Counts) error { return nil }
	}
	if rep.Repaired == nil {
		rep.Repaired = func(Repaired) error { return nil }
	}
	w := &walk{a: a, srcs: a.sources(), opt: opt, rep: rep, notes: []string{}, noted: map[string]bool{},
		profiles: map[string]*profileTargets{}, recordings: make(chan *recording, opt.Parallel)}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var recorder sync.WaitGroup
	recorder.Go(func() { w.recorder(ctx) })
	defer func() {
		close(w.recordings) // every worker has ended
		recorder.Wait()
	}()
	var wg sync.WaitGroup
	order := make(chan *audited, opt.Parallel)
	var more bool
	var listErr error // the listing failed: the objects started before are still reported
	wg.Go(func() {
		defer close(order)
		more, listErr = w.start(ctx, &wg, order)
	})
	err := w.take(ctx, order)
	if err != nil {
		cancel()
		for range order { // the walk stops at the next object
		}
	}
	wg.Wait()
	if err == nil && listErr != nil && !isCanceled(listErr) {
		err = listErr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil && more {
		for _, l := range w.lists { // what the walk did not reach, all after Last
			a.listings.keep(l.t.URL, w.n.Last, l.arks, l.taken)
		}
	}
	w.n.BytesRead = w.bytes.Load()
	return Summary{Counts: w.n, More: more, Notes: append(w.notes, w.listNotes...)}, err
}

// Check refuses options that ask nothing sensible, as the inventory
// refuses a bad question (ErrInvalid: a 400 at the API, which checks
// before its answer starts). Run checks them too.
func (o Options) Check() error {
	switch {
	case o.Limit < 0:
		return fmt.Errorf("audit: %w: limit %d: want 0 (all) or more", inventory.ErrInvalid, o.Limit)
	case o.Parallel < 0:
		return fmt.Errorf("audit: %w: parallel %d: want 1 or more", inventory.ErrInvalid, o.Parallel)
	case o.Every < 0:
		return fmt.Errorf("audit: %w: every %s: want a positive interval between reports of the counts", inventory.ErrInvalid, o.Every)
	case len(o.ARKs) > 0 && (o.After != "" || o.Limit > 0):
		return fmt.Errorf("audit: %w: ark with after or limit: ask for ARKs alone, or for a part of the walk", inventory.ErrInvalid)
	case !utf8.ValidString(o.After) || strings.ContainsRune(o.After, 0):
		return fmt.Errorf("audit: %w: after %q: has a NUL or bad UTF-8, which no ARK has", inventory.ErrInvalid, o.After)
	case o.Record && !o.Fixity:
		return fmt.Errorf("audit: %w: record without fixity: a fixity check event records the bytes read back and hashed; ask for fixity too", inventory.ErrInvalid)
	case slices.Contains(o.ARKs, ""):
		return fmt.Errorf("audit: %w: an empty ARK in the list", inventory.ErrInvalid)
	}
	return nil
}

// start audits each chosen object in its own goroutine of wg, Parallel at
// once, and hands them to order in ARK order. more says Limit stopped it
// before the last object.
func (w *walk) start(ctx context.Context, wg *sync.WaitGroup, order chan<- *audited) (more bool, err error) {
	slots := make(chan struct{}, w.opt.Parallel)
	begin := func(o *audited) error {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		o.done = make(chan struct{})
		select {
		case order <- o:
		case <-ctx.Done():
			<-slots
			return ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-slots }()
			defer close(o.done)
			w.object(ctx, o)
		})
		return nil
	}
	if len(w.opt.ARKs) > 0 {
		arks := slices.Clone(w.opt.ARKs)
		slices.Sort(arks)
		for _, ark := range slices.Compact(arks) {
			if err := begin(&audited{ark: ark}); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	size := pageSize
	if w.opt.Limit > 0 {
		size = min(size, w.opt.Limit+1) // the row after the limit tells whether there is more
	}
	// The inventories' walks merged by ARK, so that After and Last stay
	// one ARK; an ARK in several is one object for Limit, audited in each.
	var cursors []*cursor
	for _, s := range w.srcs {
		next, stop := iter.Pull2(inventory.ObjectsAfter(ctx, s.inv, w.opt.After, size))
		defer stop()
		cursors = append(cursors, &cursor{source: s, next: next})
	}
	listed, unreadable := w.listed(ctx)
	if len(unreadable) > 0 { // before the first ARK: they have none
		done := make(chan struct{})
		close(done)
		select {
		case order <- &audited{findings: unreadable, done: done}:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	last, n := w.opt.After, 0
	for {
		ark := ""
		for _, c := range cursors {
			if err := c.fill(); err != nil {
				return false, listError(c.name, last, err)
			}
			if c.ok && (ark == "" || c.row.ARK < ark) {
				ark = c.row.ARK
			}
		}
		for _, l := range listed {
			if len(l.arks) > 0 && (ark == "" || l.arks[0] < ark) {
				ark = l.arks[0]
			}
		}
		switch {
		case ark == "":
			return false, nil
		case w.opt.Limit > 0 && n == w.opt.Limit:
			return true, nil
		}
		var holders []holder
		for _, c := range cursors {
			if c.ok && c.row.ARK == ark {
				holders = append(holders, holder{c.source, c.row})
				c.ok = false
			}
		}
		var storedAt []Target
		var primaryOf []string
		for _, l := range listed {
			if len(l.arks) > 0 && l.arks[0] == ark {
				storedAt = append(storedAt, l.t)
				primaryOf = append(primaryOf, l.primaryOf...)
				l.arks = l.arks[1:]
			}
		}
		if len(holders) == 0 {
			if err := begin(&audited{ark: ark, unrecordedAt: storedAt, primaryOf: primaryOf}); err != nil {
				return false, err
			}
		}
		// Audited from each; its first audit says it is in several.
		for i, h := range holders {
			var first []Finding
			if i == 0 && len(holders) > 1 {
				first = []Finding{w.a.recordedTwice(ark, holders)}
			}
			if err := begin(&audited{ark: ark, src: h.source, findings: first}); err != nil {
				return false, err
			}
		}
		last, n = ark, n+1
	}
}

// storedList is the objects one storage target holds after
// Options.After, in ARK order: what the walk has not passed yet.
type storedList struct {
	t         Target
	arks      []string
	primaryOf []string  // the profiles whose primary target it is
	taken     time.Time // when the target was listed
}

// listed lists each storage target of the Auditor's profiles that can
// name its objects, each target once (a walk of Options.ARKs lists none),
// after Options.After, or takes the rest of its listing that the part
// this walk continues left (keptListings). A target that cannot be listed
// is a note: an object only it holds, and no inventory records, goes
// unseen. An object there that does not say which it is is an
// object-unreadable finding, and the rest are listed.
func (w *walk) listed(ctx context.Context) (out []*storedList, unreadable []Finding) {
	seen := map[string]*storedList{} // nil: not listed
	for _, prof := range w.a.Profiles {
		targets, err := w.targets(ctx, prof)
		if err != nil {
			continue // its objects' findings say so (unknown-profile)
		}
		for i, t := range targets {
			if sl, ok := seen[t.URL]; ok {
				if sl != nil && i == 0 {
					sl.primaryOf = append(sl.primaryOf, prof)
				}
				continue
			}
			seen[t.URL] = nil
			l, ok := t.Store.(storage.Lister)
			if t.Err != nil || !ok {
				continue
			}
			sl := &storedList{t: t}
			if kept := w.a.listings.take(t.URL, w.opt.After); kept != nil {
				sl.arks, sl.taken = kept.arks, kept.taken
				w.listNotes = append(w.listNotes, fmt.Sprintf("storage target %s was not listed again: this part took "+
					"the rest of the listing the part before it left, taken %s; an object stored there since, that no "+
					"inventory records, was not looked for (an audit that continues no part lists anew)",
					t.Name, kept.taken.UTC().Format(time.RFC3339)))
			} else {
				// Every one after After, whatever Limit: the part that
				// continues this one takes the rest.
				arks, bad, err := l.Objects(ctx, w.opt.After)
				if err != nil {
					if ctx.Err() == nil {
						w.listNotes = append(w.listNotes, fmt.Sprintf("storage target %s could not be listed: %s; objects "+
							"stored there that no inventory records were not looked for: audit again once it can be",
							t.Name, t.shown(err)))
					}
					continue
				}
				sl.arks, sl.taken = arks, time.Now()
				for _, u := range bad {
					unreadable = append(unreadable, Finding{Kind: ObjectUnreadable, Target: t.Name, Message: fmt.Sprintf(
						"storage target %s holds an object at %s that does not say which object it is: %s; no audit meets "+
							"it, and its versions may be lost from the record, until it is mended: compare its "+
							"inventory.json with its sidecar and with its newest version's inventory.json, or restore "+
							"the object (%s)", t.Name, u.Root, t.shown(u.Err), recovery)})
				}
			}
			if i == 0 {
				sl.primaryOf = []string{prof}
			}
			seen[t.URL] = sl
			out = append(out, sl)
		}
	}
	w.lists = out
	return out, unreadable
}

// cursor is where the walk is in one inventory: row is its next object
// of the source's profiles, when ok.
type cursor struct {
	*source
	next func() (inventory.ObjectRow, error, bool)
	row  inventory.ObjectRow
	ok   bool
	done bool
}

// fill reads the cursor's next row of its profiles, unless it holds one.
func (c *cursor) fill() error {
	for !c.ok && !c.done {
		row, err, more := c.next()
		switch {
		case !more:
			c.done = true
		case err != nil:
			c.done = true
			return err
		case c.holds(row.Profile):
			c.row, c.ok = row, true
		}
	}
	return nil
}

// listError is a listing of the inventory named that failed: the audit
// ends, and says where to take it up again.
func listError(name, after string, err error) error {
	if isCanceled(err) {
		return err
	}
	if after == "" {
		return fmt.Errorf("audit: listing the objects of %s: %w", name, err)
	}
	return fmt.Errorf("audit: listing the objects of %s after %s: %w (an audit with after=%s takes it up there)", name, after, err, after)
}

// take reports each object as its audit ends, in ARK order, and the counts
// in between.
func (w *walk) take(ctx context.Context, order <-chan *audited) error {
	tick := time.NewTicker(w.opt.Every)
	defer tick.Stop()
	for {
		select {
		case o, ok := <-order:
			if !ok {
				return nil
			}
			if err := w.await(o.done, tick.C); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err() // its audit was cut short: not reported
			}
			if err := w.report(o); err != nil {
				return err
			}
		case <-tick.C:
			if err := w.progress(); err != nil {
				return err
			}
		}
	}
}

// await waits for done, reporting the counts at each tick meanwhile.
func (w *walk) await(done <-chan struct{}, tick <-chan time.Time) error {
	for {
		select {
		case <-done:
			return nil
		case <-tick:
			if err := w.progress(); err != nil {
				return err
			}
		}
	}
}

// report counts one audited object and reports its findings, and a note
// for each target met first there that was audited at its latest version
// alone.
func (w *walk) report(o *audited) error {
	for _, name := range o.latestOnly {
		if !w.noted[name] {
			w.noted[name] = true
			w.notes = append(w.notes, fmt.Sprintf("storage target %s is a storage service that serves each object's latest "+
				"version alone: only the latest version was compared there (its number and files), not the older versions "+
				"nor, with fixity, any bytes; audit the storage root behind the service to cover them", name))
		}
	}
	switch {
	case o.ark == "": // the listings' object-unreadable findings
	case o.unknown:
		w.n.NotRecorded++
	case len(o.unrecordedAt) == 0:
		w.n.Objects++
	}
	w.n.Versions += o.versions
	w.n.Files += o.files
	if o.ark != "" {
		w.n.Last = o.ark
	}
	w.n.EventsRecorded += o.events
	for _, r := range o.repaired {
		w.n.Repaired++
		if err := w.rep.Repaired(r); err != nil {
			return err
		}
	}
	for _, f := range o.findings {
		w.n.Findings++
		if err := w.rep.Finding(f); err != nil {
			return err
		}
	}
	return nil
}

func (w *walk) progress() error {
	n := w.n
	n.BytesRead = w.bytes.Load()
	return w.rep.Progress(n)
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
