package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/visible"
)

// auditCommand asks the daemon's API for the audit of storage (GET
// /audit: the daemon has the inventory and the storage targets) and shows
// it as it comes.
func (a *app) auditCommand() *cobra.Command {
	var (
		api     string
		timeout time.Duration
		q       auditQuery
	)
	cmd := &cobra.Command{
		Use:   "audit [ARK…] [--fixity [--record]] [--repair] [--after ARK] [--limit N]",
		Short: "Compare the objects the inventory records with their storage targets: what a restore lost, and where",
		Long: "audit asks the daemon's HTTP API (--api) to compare every object its inventory records, in\n" +
			"ARK order, with each storage target of the object's profile: the versions each target has\n" +
			"against those recorded, and each version's files (name, size and SHA-256, as the target's\n" +
			"OCFL inventory.json gives them). Without ARKs it also lists each OCFL target of the daemon's\n" +
			"profiles (every object's inventory.json there, whatever --after and --limit), and an ARK asked\n" +
			"for that no inventory records is looked for at each target: an object stored there that no\n" +
			"inventory records (the inventory restored from a backup older than storage) is an\n" +
			"object-unrecorded finding. Without --fixity it reads each object's inventory.json and asks\n" +
			"each content file's size. --fixity also reads every stored byte back and hashes it: all of\n" +
			"storage, at each target (hours on a large repository, and a cloud bucket's egress); only it\n" +
			"finds bytes changed at the same size. --record (with\n" +
			"--fixity) leaves the evidence in the inventory: a PREMIS fixity check event for each version\n" +
			"at each target, success or failure (the files that failed, and how), and a failure for a\n" +
			"version a target lacks; ingestq object ARK shows the last check. --repair (the ingest queue\n" +
			"held: ingestq hold queue) records from storage what an inventory restored from an older backup\n" +
			"lost: each object-unrecorded and versions-unrecorded version the primary target of the\n" +
			"object's profile holds, with its files, job and batch, local ids, ERC and copies; each is a\n" +
			"\"repaired:\" line, one that fails a repair-failed finding. The route is an admin's:\n" +
			EnvAPIToken + " holds an admin token (serve's " + EnvAdminToken + ", or an admin line of its\n" +
			"--api-tokens).\n\n" +
			"Each finding is one line, as it comes: its kind, then the ARK, storage target, version and\n" +
			"file it is about, and what to do. Restore what it names from a replica target (each holds\n" +
			"whole OCFL objects) or from storage's backup (README \"Backups and recovery\"); a deposit that\n" +
			"failed at Storing meanwhile stores its version once you run ingestq requeue JID. Then audit\n" +
			"the object again: ingestq audit ARK. The summary comes last: objects, versions, files, bytes\n" +
			"read, findings, events recorded (--record) and how long. On a terminal a progress line shows\n" +
			"the daemon's counts (at least every 10 s).\n\n" +
			"ARKs given: those alone; one the inventory lacks is named in an error (exit 1), not audited.\n" +
			"--limit N stops after N objects; --after ARK begins after that\n" +
			"one: an audit stopped (Ctrl-C), cut, or ended by --limit says the --after that takes it up.\n" +
			"-o json writes the API's NDJSON lines as they come: finding, progress, and summary last (an\n" +
			"answer without it was cut). Exit 0: nothing found; 1: findings, or the audit failed or was\n" +
			"cut; 2: bad usage; 130: Ctrl-C.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, arks []string) error {
			q.arks, q.limitGiven = arks, cmd.Flags().Changed("limit")
			query, err := q.encode()
			if err != nil {
				return err
			}
			// The stall rule (decision 346): no byte for the timeout fails, bytes
			// moving never cut. Its plain client asks once: an audit is long.
			client := fetch.New(fetch.Config{Timeout: timeout, AnyAddress: true}).BackEnd().HTTPClient
			defer client.CloseIdleConnections()
			src := &apiObjects{base: strings.TrimSuffix(api, "/"), token: a.getenv(EnvAPIToken), why: "the audit runs in the daemon",
				tokenFrom: "an admin token is serve's " + EnvAdminToken + ", or an admin line of its --api-tokens",
				elsewhere: a.liveAPIs, client: client}
			err = a.audit(cmd.Context(), src, query, q)
			var ee *exitError
			if err == nil || errors.As(err, &ee) {
				return err
			}
			return &exitError{code: 1, err: err}
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&q.fixity, "fixity", false, "also read every stored byte back and hash it (all of storage, at each target)")
	fl.BoolVar(&q.record, "record", false, "with --fixity: record a PREMIS fixity check event of each version at each target in the inventory")
	fl.BoolVar(&q.repair, "repair", false, "record from the primary target the versions the inventory lost (restored older than storage); the ingest queue must be held")
	fl.StringVar(&q.after, "after", "", "begin after this ARK (the last one an earlier audit finished)")
	fl.IntVar(&q.limit, "limit", 0, "stop after this many objects (default: every one)")
	fl.StringVar(&api, "api", a.env(EnvAPI, defaultAPI), "the daemon's HTTP API, which audits (env "+EnvAPI+"; an admin token in "+EnvAPIToken+")")
	durationVar(fl, &timeout, "fetch-timeout", fetch.Defaults.Timeout, "the daemon's API moving no byte for this long fails the audit "+
		"(its progress lines, at least every 10 s, keep a long one going)")
	return cmd
}

// auditQuery is what the audit is asked for.
type auditQuery struct {
	arks       []string
	fixity     bool
	record     bool
	repair     bool
	after      string
	limit      int
	limitGiven bool
}

// encode checks the question as the API would, as a usage error, and
// writes its query.
func (q auditQuery) encode() (string, error) {
	v := url.Values{}
	for _, ark := range q.arks {
		if !strings.HasPrefix(ark, "ark:") {
			return "", usagef("audit: %q is not an ARK (want ark:/NAAN/NAME)", ark)
		}
		v.Add("ark", ark)
	}
	switch {
	case len(q.arks) > 0 && (q.after != "" || q.limitGiven):
		return "", usagef("audit: ARKs given with --after or --limit: audit the ARKs alone, or a part of the walk")
	case q.record && !q.fixity:
		return "", usagef("audit: --record without --fixity: a fixity check event records the bytes read back; add --fixity")
	case q.limitGiven && q.limit < 1:
		return "", usagef("audit: --limit %d: want a number of objects, 1 or more (leave it out for every one)", q.limit)
	case q.after != "" && !strings.HasPrefix(q.after, "ark:"):
		// Any text is a place in ARK order: a mistyped one would audit nothing.
		return "", usagef("audit: --after %q is not an ARK (want the last ARK an audit finished, ark:/NAAN/NAME)", q.after)
	}
	if q.after != "" {
		v.Set("after", q.after)
	}
	if q.limitGiven {
		v.Set("limit", strconv.Itoa(q.limit))
	}
	if q.fixity {
		v.Set("fixity", "true")
	}
	if q.record {
		v.Set("record", "true")
	}
	if q.repair {
		v.Set("repair", "true")
	}
	if len(v) == 0 {
		return "/audit", nil
	}
	return "/audit?" + v.Encode(), nil
}

// auditShown is an audit as it comes: what the command shows of it, and
// where to take it up when it ends early.
type auditShown struct {
	a     *app
	q     auditQuery
	start time.Time
	p     *progressLine // the terminal's progress line; nil: none (not a terminal, or -o json)
	// unfollow stops the progress line's redraws (follow), once.
	unfollow func()
	mu       sync.Mutex   // seen: the answer's reader writes it, the progress line's redraws read it
	seen     audit.Counts // the last progress line's counts, with the findings counted since
	// done is the last ARK whose findings all came: --after takes the audit
	// up after it. A finding's ARK is done once another ARK's finding or a
	// progress line comes.
	done, findingARK string
	// absent are the ARKs asked for that the inventory does not hold (the
	// API's not-recorded findings): an error, not findings of objects audited.
	absent []string
}

// audit runs the audit at the API and shows it: exit 1 with findings, or
// when it ended early; 130 when stopped.
func (a *app) audit(ctx context.Context, src *apiObjects, query string, q auditQuery) error {
	s := &auditShown{a: a, q: q, start: time.Now(), done: q.after}
	resp, err := src.open(ctx, query, "audit")
	switch {
	case err != nil && ctx.Err() != nil: // Ctrl-C before the answer's first line, which its headers wait for
		return s.stopped()
	case errors.Is(err, inventory.ErrNotFound):
		return fmt.Errorf("the daemon's API at %s has no audit (a daemon older than this ingestq?)", src.base)
	case err != nil:
		return err
	}
	defer resp.Body.Close()
	if !a.json() && isTerminal(a.stdout) {
		s.p = newProgressLine(a.stdout, true, "")
		out := a.stdout
		a.stdout = s.p // a line printed clears the progress line, which is drawn again below it
		defer func() { s.p.end(); a.stdout = out }()
		if isTerminal(a.stderr) {
			defer a.logs.divert(s.p)()
		}
		s.unfollow = s.follow()
		defer s.unfollow()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a finding quotes file names and error texts
	for sc.Scan() {
		sum, err := s.line(sc.Bytes())
		if err != nil {
			s.ended("ended")
			return err
		}
		if sum != nil {
			return s.summary(*sum)
		}
	}
	err = sc.Err()
	if ctx.Err() != nil {
		return s.stopped()
	}
	if err == nil {
		err = errors.New("the answer ended")
	}
	s.ended("cut")
	return fmt.Errorf("the audit's answer from %s was cut before its summary: %v; %s", src.base, err, s.takeUp())
}

// auditSummary is the audit's last line.
type auditSummary struct {
	audit.Summary
	Error string `json:"error"`
}

// line shows one line of the answer; a summary line is returned.
func (s *auditShown) line(data []byte) (*auditSummary, error) {
	var kind struct{ Type string }
	if err := json.Unmarshal(data, &kind); err != nil {
		return nil, fmt.Errorf("the audit's answer has a line that is not JSON (%v): %.200q", err, data)
	}
	if s.a.json() {
		fmt.Fprintln(s.a.stdout, visible.Text(string(data)))
	}
	var err error
	switch kind.Type {
	case "finding":
		var f audit.Finding
		if err = json.Unmarshal(data, &f); err == nil {
			s.finding(f)
		}
	case "progress":
		var c audit.Counts
		if err = json.Unmarshal(data, &c); err == nil {
			s.mu.Lock()
			s.seen = c
			s.mu.Unlock()
			s.done, s.findingARK = max(s.done, c.Last), ""
			s.draw(false)
		}
	case "repaired":
		var r audit.Repaired
		if err = json.Unmarshal(data, &r); err == nil && !s.a.json() {
			s.a.println("%s", r.String())
		}
	case "summary":
		var sum auditSummary
		if err = json.Unmarshal(data, &sum); err == nil {
			return &sum, nil
		}
	default:
		s.a.log.Debug("audit: a line of a type this CLI does not know", "type", kind.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("the audit's %s line: %w: %.200q", kind.Type, err, data)
	}
	return nil, nil
}

func (s *auditShown) finding(f audit.Finding) {
	if s.findingARK != "" && s.findingARK != f.ARK {
		s.done = max(s.done, s.findingARK)
	}
	s.findingARK = f.ARK
	if f.Kind == audit.NotRecorded {
		s.absent = append(s.absent, f.ARK)
		return
	}
	s.mu.Lock()
	s.seen.Findings++
	s.mu.Unlock()
	if !s.a.json() {
		s.a.println("%s", f.String())
	}
	s.draw(false)
}

// last prints the audit's last line: on a terminal in place of the
// progress line, which it ends.
func (s *auditShown) last(text string) {
	if s.p == nil {
		s.a.println("%s", text)
		return
	}
	s.unfollow()
	s.p.endWith(text)
}

// draw shows the counts on the progress line, at most every progressTick
// unless force.
func (s *auditShown) draw(force bool) {
	if s.p == nil {
		return
	}
	s.mu.Lock()
	text := s.progressText()
	s.mu.Unlock()
	s.p.draw(text, time.Now(), force)
}

// follow draws the progress line now and again every progressTick (what
// a throttled draw left out, and the time going) until the returned stop.
func (s *auditShown) follow() (stop func()) {
	s.draw(true)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressTick)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s.draw(false)
			case <-done:
				return
			}
		}
	})
	return sync.OnceFunc(func() { close(done); wg.Wait() })
}

// progressText is the terminal's progress line: the daemon's counts at its
// last progress line. s.mu is held.
func (s *auditShown) progressText() string {
	text := "auditing: " + s.countsText(s.seen, time.Second)
	if s.seen.Last != "" {
		text += "; at " + visible.Text(s.seen.Last)
	}
	return text
}

// countsText is "3 objects, 4 versions, 12 files; 1.5 KiB read; 2
// findings; 1.23s" (with --record, "; 4 fixity check events recorded",
// and with --repair, "; 2 versions repaired", before the time): the time since the start, to round. An ARK the
// inventory lacks is no object and no finding here: an error says so.
func (s *auditShown) countsText(c audit.Counts, round time.Duration) string {
	c.Findings -= c.NotRecorded
	recorded := ""
	if s.q.record {
		recorded = "; " + plural(c.EventsRecorded, "fixity check event") + " recorded"
	}
	if s.q.repair {
		recorded += "; " + plural(c.Repaired, "version") + " repaired"
	}
	return fmt.Sprintf("%s, %s, %s; %s read; %s%s; %v", plural(c.Objects, "object"), plural(c.Versions, "version"),
		plural(c.Files, "file"), humanBytes(c.BytesRead), plural(c.Findings, "finding"), recorded, time.Since(s.start).Round(round))
}

// summary shows the audit's end: exit 1 when it found something or ended
// early.
func (s *auditShown) summary(sum auditSummary) error {
	if !s.a.json() {
		s.last("audited " + s.countsText(sum.Counts, 10*time.Millisecond))
		for _, n := range sum.Notes {
			s.a.println("note: %s", n)
		}
		if sum.More && sum.Error == "" {
			s.a.println("more objects follow: %s", s.resume(sum.Last))
		}
	}
	if sum.Error != "" {
		s.done = max(s.done, sum.Last)
		return fmt.Errorf("the audit ended early: %s; %s", sum.Error, s.takeUp())
	}
	if len(s.absent) > 0 {
		return fmt.Errorf("no object %s in the inventory: is the ARK right?", visible.Text(strings.Join(s.absent, ", ")))
	}
	if sum.Findings > 0 {
		return &exitError{code: 1, silent: true, err: errors.New(plural(sum.Findings, "finding"))}
	}
	return nil
}

// stopped ends an audit the user stopped (Ctrl-C): the counts so far, and
// how to go on.
func (s *auditShown) stopped() error {
	s.ended("stopped")
	return &exitError{code: exitInterrupted, err: fmt.Errorf("audit stopped; %s", s.takeUp())}
}

// ended shows the counts so far ("stopped after …", "cut after …") when
// the answer ends before its summary: on a terminal in place of the
// progress line, which would otherwise stay, still "auditing".
func (s *auditShown) ended(how string) {
	if s.a.json() {
		return
	}
	s.mu.Lock()
	seen := s.seen
	s.mu.Unlock()
	s.last(how + " after " + s.countsText(seen, 10*time.Millisecond) + " (the daemon's last counts)")
}

// takeUp says how to go on from where the audit ended.
func (s *auditShown) takeUp() string {
	switch {
	case len(s.q.arks) > 0:
		return "audit those ARKs again"
	case s.done == "":
		return "no object was audited in full: run the audit again"
	case s.done == s.q.after: // the --after given, not audited here
		return "no object was audited in full: " + s.resume(s.done) + " takes it up"
	}
	return "the last object audited in full is " + s.done + ": " + s.resume(s.done) + " takes it up"
}

// resume is the command that audits on after the ARK after, as asked.
func (s *auditShown) resume(after string) string {
	cmd := "ingestq audit"
	if s.q.fixity {
		cmd += " --fixity"
	}
	if s.q.record {
		cmd += " --record"
	}
	if s.q.repair {
		cmd += " --repair"
	}
	cmd += " --after " + after
	if s.q.limitGiven {
		cmd += " --limit " + strconv.Itoa(s.q.limit)
	}
	return cmd
}
