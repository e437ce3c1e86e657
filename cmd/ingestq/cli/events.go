package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

const (
	eventsDial   = 3 * time.Second // connect timeout of events tail and replay
	announceDial = time.Second     // connect and publish timeout of an admin event
	// replayWait bounds how long events replay waits for an event stream
	// that does not answer, as long as a replay waits for a stalled one.
	replayWait = 30 * time.Second
)

// connectNATS connects to the daemon's NATS (natsURL) with the credentials
// given and opts. With a token, its replies take the token's inbox prefix
// (events.InboxPrefix), the only inboxes a daemon with API tokens lets the
// token's client read; a NATS that asks no token, the previous release's
// daemons among them, lets a client read any.
func (a *app) connectNATS(opts ...nats.Option) (*nats.Conn, error) {
	auth, err := a.natsAuth.AuthOptions()
	if err != nil {
		return nil, err
	}
	if token := a.natsToken(); token != "" {
		auth = append(auth, nats.CustomInboxPrefix(events.InboxPrefix(token)))
	}
	return nats.Connect(a.natsURL(), append(auth, opts...)...)
}

// natsToken is the token the CLI presents to NATS: one in --nats's first
// URL (nats://TOKEN@host, or TOKEN@host), which nats.go sends rather than
// --nats-token, else --nats-token. The URL is read as nats.go reads it
// (natsServers): a token it sends is never missed.
func (a *app) natsToken() string {
	if servers := a.natsServers(); len(servers) > 0 {
		if u, err := url.Parse(servers[0]); err == nil && u.User != nil {
			if _, password := u.User.Password(); password {
				return ""
			}
			return u.User.Username()
		}
	}
	return a.natsAuth.Token
}

// natsServers are the URLs of --nats as nats.go reads them: each member of
// the list trimmed, empty ones left out, nats:// before one that names no
// scheme (host:port, TOKEN@host:port).
func (a *app) natsServers() []string {
	var servers []string
	for _, s := range strings.Split(a.natsURL(), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		servers = append(servers, s)
	}
	return servers
}

// dialNATS connects to the daemon's NATS (connectNATS). The client's own
// complaints go to the log instead of stderr; it reconnects for as long as
// the command runs.
func (a *app) dialNATS(timeout time.Duration) (*nats.Conn, error) {
	return a.connectNATS(
		nats.Name("ingestq-cli"),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			a.log.Debug("nats: "+err.Error(), "subject", subject)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				a.log.Warn("nats: connection lost; reconnecting", "url", a.natsShown(), "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { a.log.Info("nats: reconnected", "url", a.natsShown()) }),
	)
}

// eventsNATS connects for events tail and replay; failure is exit 1.
func (a *app) eventsNATS() (*nats.Conn, error) {
	nc, err := a.dialNATS(eventsDial)
	if err != nil {
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: %v", a.natsWhy(err), err)}
	}
	return nc, nil
}

// natsWhy says why a connection to the daemon's NATS failed: the
// credentials or TLS refused, a file of them unreadable, or nothing that
// answers.
func (a *app) natsWhy(err error) string {
	return cmp.Or(a.natsRefusal(err), fmt.Sprintf("the daemon's NATS is not reachable at %s (is ingestq serve running? --nats or %s say where)",
		a.natsShown(), EnvNATS))
}

// natsRefusal says how the credentials or TLS for NATS failed, or "" when
// they did not.
func (a *app) natsRefusal(err error) string {
	var file *fs.PathError
	switch {
	case events.AuthRefused(err):
		return fmt.Sprintf("NATS at %s refused the credentials: authorization failed (a daemon with API tokens admits on its "+
			"NATS only a client presenting one of its serve --api-tokens, unscoped, as --nats-token or %s: read to follow "+
			"and replay, operate or admin to record actions; another NATS: --nats-creds, --nats-token or "+
			"--nats-tls-ca/-cert/-key give those it asks for)", a.natsShown(), EnvNATSToken)
	case errors.Is(err, nats.ErrPermissionViolation):
		return fmt.Sprintf("NATS at %s refused to take it: the token given (--nats-token, %s) may not publish events; "+
			"recording an action needs an operate or admin token of the daemon's serve --api-tokens", a.natsShown(), EnvNATSToken)
	case events.TLSFailed(err):
		return fmt.Sprintf("the TLS handshake with NATS at %s failed (--nats-tls-ca names the CA of its certificate, "+
			"--nats-tls-cert and --nats-tls-key the client certificate it asks for)", a.natsShown())
	case errors.As(err, &file):
		return fmt.Sprintf("%s, given for NATS at %s, cannot be read", file.Path, a.natsShown())
	}
	return ""
}

// refusedSince says why err, a command's end, came when NATS refused its
// credentials after it connected (a token the daemon's reload revoked).
func (a *app) refusedSince(nc *nats.Conn, err error) error {
	if why := a.natsRefusal(nc.LastError()); err != nil && why != "" {
		return fmt.Errorf("%s: %w", why, err)
	}
	return err
}

// asExit1 turns an error that is not already an exitError into exit 1.
func asExit1(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 1, err: err}
}

func (a *app) eventsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events tail | replay | inbox-prefix",
		Short: "Follow the daemon's events live, or replay the recorded ones",
		Long: "events reads the events the daemon publishes on NATS (--nats, default nats://127.0.0.1:4222):\n" +
			"every change of a job or batch, progress, and operators' actions. tail follows them live;\n" +
			"replay reads those recorded in the stream " + events.DefaultStream + "; inbox-prefix prints the one\n" +
			"another NATS client presenting the token takes its replies under, on a daemon with API tokens.",
		Args: cobra.ArbitraryArgs,
		RunE: group,
	}
	cmd.AddCommand(a.tailCommand(), a.replayCommand(), a.inboxPrefixCommand())
	return cmd
}

func (a *app) inboxPrefixCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inbox-prefix",
		Short: "Print the inbox prefix of the NATS token given, for another NATS client",
		Long: "inbox-prefix prints the inbox prefix of the token given (--nats-token, " + EnvNATSToken + ", or one in --nats):\n" +
			"a daemon with API tokens lets a client presenting it read replies under that prefix only.\n" +
			"ingestq takes it by itself; give it to another client: nats --inbox-prefix PREFIX,\n" +
			"nats.CustomInboxPrefix(PREFIX) in nats.go. It is _INBOX_ and the first 16 hex digits\n" +
			"of the token's SHA-256.",
		Args: args(),
		RunE: func(*cobra.Command, []string) error {
			token := a.natsToken()
			if token == "" {
				return usagef("events inbox-prefix: no token given: --nats-token or %s", EnvNATSToken)
			}
			a.println("%s", events.InboxPrefix(token))
			return nil
		},
	}
}

func (a *app) tailCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tail [SUBJECT]",
		Short: "Print live events (default " + events.SubjectAll + ") until Ctrl-C",
		Long: "tail prints each live event on SUBJECT, a NATS subject filter (default " + events.SubjectAll + "),\n" +
			"such as ingestq.job.failed.* or ingestq.batch.>, one line each (-o json: one JSON event\n" +
			"a line), until Ctrl-C.",
		Args: args("[SUBJECT]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			subject := events.SubjectAll
			if len(args) == 1 {
				subject = args[0]
			}
			if first, _, _ := strings.Cut(subject, "."); first != "ingestq" && first != "*" && first != ">" {
				// No event is published outside ingestq.: it would wait for ever.
				return usagef("events tail: subject %q: every event's subject starts with ingestq. (ingestq.job.>, ingestq.batch.failed.*)", subject)
			}
			nc, err := a.eventsNATS()
			if err != nil {
				return err
			}
			defer nc.Close()
			a.log.Debug("events tail: following", "subject", subject, "nats", a.natsShown())
			if !a.json() {
				// Nothing else is printed until an event comes: say what it waits for.
				a.note("waiting for events on %s from %s; each is printed as it comes (Ctrl-C stops)", subject, redact.Location(nc.ConnectedUrl()))
			}
			return asExit1(a.refusedSince(nc, events.Tail(cmd.Context(), nc, subject, func(ev events.Event) {
				if a.json() {
					data, err := json.Marshal(ev)
					if err == nil {
						a.println("%s", string(data)) // a string, shown as writeIndented shows JSON
					}
					return
				}
				a.println("%s", eventLine(ev))
			})))
		},
	}
}

func (a *app) replayCommand() *cobra.Command {
	var since, batch, job, access string
	var allProgress bool
	var from time.Time
	cmd := &cobra.Command{
		Use:   "replay [--since DURATION|TIME] [--batch BID|UUID] [--job JID] [--access REF] [--progress]",
		Short: "Print the recorded events as a timeline",
		Long: "replay prints the events recorded in the stream, oldest first, each with its date and time:\n" +
			"with --batch or --job, in the order they happened (the batch's and each job's own in\n" +
			"order, an event published late for a move that had none in its place, merged by time).\n" +
			"A download's progress events (two a second) are printed as their last: each run of a\n" +
			"job's progress events from one host, between its other events, as its last one (a\n" +
			"wait's is always printed); --progress prints every one. -o json prints a JSON array of\n" +
			"every event, in the same order. --since takes a duration back from now\n" +
			"(10m, 2h, 1d, 2w, 1d12h) or a time (RFC 3339, or 2006-01-02 15:04:05 in local time).\n" +
			"A --batch or --job this queue never made is refused (exit 1); a removed one's history is replayed.\n" +
			"A stream that does not answer (a NATS cluster electing or re-forming) is waited for up to 30 s.",
		Args: args(),
		PreRunE: func(*cobra.Command, []string) (err error) {
			// Malformed ids are usage errors, as the API's 400s.
			if job != "" {
				if err := ops.CheckJobID(job); err != nil {
					return usagef("--job: %v", err)
				}
			}
			if access != "" {
				if err := ops.CheckAccessRef(access); err != nil {
					return usagef("--access: %v", err)
				}
			}
			if since != "" {
				from, err = parseSince(since, time.Now())
			}
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			f := events.Filter{Since: from, BatchID: batch, JobID: job, AccessID: access}
			// The queue, when there is one, names a batch by its uuid and
			// tells which events are its own.
			q, qerr := a.existingQueue(ctx)
			if qerr == nil {
				f = a.ops(q).OfQueue(ctx, f)
			}
			if batch != "" && !ops.IsBatchID(batch) {
				if qerr != nil {
					return asExit1(qerr)
				}
				var err error
				if f.BatchID, err = a.ops(q).BatchID(ctx, batch); err != nil {
					return asExit1(err)
				}
			}
			nc, err := a.eventsNATS()
			if err != nil {
				return err
			}
			defer nc.Close()
			evs, err := a.replayWaiting(ctx, nc, f)
			if errors.Is(err, events.ErrOtherQueue) {
				err = fmt.Errorf("%w (--nats, env %s)", err, EnvNATS)
			}
			if err != nil {
				return asExit1(err)
			}
			if f.BatchID != "" || job != "" {
				evs = events.Timeline(evs)
			}
			if len(evs) == 0 && (f.BatchID != "" || job != "") {
				if qerr != nil {
					return asExit1(qerr)
				}
				if err := checkEverMade(ctx, a.ops(q), f.BatchID, job); err != nil {
					return asExit1(err)
				}
			}
			if a.json() {
				return a.writeJSON(evs)
			}
			if len(evs) == 0 { // a sentence, as an empty ls says it, not a log line
				a.println(noneOf("events", "recorded", since+batch+job+access != ""))
				return nil
			}
			left := 0
			if !allProgress {
				evs, left = events.LastOfProgressRuns(evs)
			}
			for _, ev := range evs {
				a.println("%s", eventLine(ev))
			}
			if left > 0 {
				a.note("%d progress events not printed: each run of a job's progress events is printed as its last (--progress prints every one)", left)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&allProgress, "progress", false, "print every progress event, not only the last of each run of a job's (-o json prints every one)")
	fl.StringVar(&since, "since", "", "only events since a duration back (10m, 1d, 2w) or a time (RFC 3339, or \"2006-01-02 15:04:05\")")
	fl.StringVar(&batch, "batch", "", "only the events of this batch (bid… or batch uuid) and its jobs")
	fl.StringVar(&job, "job", "", "only the events of this job")
	fl.StringVar(&access, "access", "", "only the events of this access request (small/qid…, large/qid…, or qid… of either queue)")
	return cmd
}

// replayWaiting replays f's events (events.Replay), waiting up to
// replayWait, said once on stderr, while the event stream is unavailable
// (a NATS cluster electing or re-forming): Replay waits at its start, this
// also when the stream stops answering midway. A try again starts from the
// start with an empty list: nothing is printed before the replay is
// whole, so nothing is printed twice.
func (a *app) replayWaiting(ctx context.Context, nc *nats.Conn, f events.Filter) ([]events.Event, error) {
	deadline := time.Now().Add(replayWait)
	noted := false
	note := func(err error) {
		if !noted {
			noted = true
			a.note("the event stream on NATS at %s does not answer (a NATS cluster electing a leader or re-forming?): "+
				"waiting up to %v for it (%v)", a.natsShown(), replayWait, err)
		}
	}
	for try := 1; ; try++ {
		evs := []events.Event{}
		err := events.Replay(ctx, nc, "", f, func(ev events.Event) error {
			evs = append(evs, ev)
			return nil
		}, events.WhenWaiting(note))
		if err == nil || ctx.Err() != nil || !events.Unavailable(nc, err) {
			return evs, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w (still so after waiting %v)", err, replayWait)
		}
		note(err)
		if !backoff.Sleep(ctx, min(left, backoff.Delay(time.Second, 5*time.Second, try))) {
			return nil, ctx.Err()
		}
	}
}

// checkEverMade refuses a batch or job (either may be "") this queue never
// made, as the API's events do: it has no events and never will, so an
// empty replay would only hide a mistyped id.
func checkEverMade(ctx context.Context, s *ops.Service, bid, jid string) error {
	if bid != "" {
		if err := s.CheckEverMade(ctx, bid, "batch"); err != nil {
			return err
		}
	}
	if jid == "" {
		return nil
	}
	return s.CheckEverMade(ctx, jid, "job")
}

// parseSince reads --since (events.ParseSince); a bad one is a usage error.
func parseSince(s string, now time.Time) (time.Time, error) {
	t, err := events.ParseSince(s, now)
	if err != nil {
		return time.Time{}, usagef("--since %v", err)
	}
	return t, nil
}

// eventLine renders an event for people, stamped with its local date and
// time to the millisecond, live (tail) or replayed alike:
//
//	2006-01-02 15:04:05.000 host  job jid0000000012 (bid0000000003)  Downloading → Processing  [message]  priority=5
//	2006-01-02 15:04:05.000 host  progress batch bid0000000003  [waiting for a busy server: …]  next_try=… waiting=yes
//
// An event a host published for another's move (recovered) has "-" for its
// host and says "recovered by NAME".
func eventLine(ev events.Event) string {
	var b strings.Builder
	b.WriteString(whenMilli(ev.Time))
	b.WriteString(" " + cmp.Or(ev.Host, "-") + "  ")
	job := func() string {
		if ev.BatchID == "" {
			return "job " + ev.JobID
		}
		return "job " + ev.JobID + " (" + ev.BatchID + ")"
	}
	switch ev.Kind {
	case events.KindJob:
		b.WriteString(job() + "  " + eventTransition(ev))
	case events.KindBatch:
		b.WriteString("batch " + ev.BatchID + "  " + eventTransition(ev))
	case events.KindProgress:
		switch {
		case ev.AccessID != "": // an access request taken over
			b.WriteString("progress access " + ev.AccessID)
		case ev.JobID == "": // a Pending batch's wait
			b.WriteString("progress batch " + ev.BatchID)
		default:
			b.WriteString("progress " + strings.TrimPrefix(job(), "job "))
		}
	case events.KindAccess:
		b.WriteString("access " + ev.AccessID + "  " + eventTransition(ev))
	case events.KindAdmin:
		b.WriteString("admin " + ev.To)
		switch {
		case ev.JobID != "":
			b.WriteString(" " + job())
		case ev.BatchID != "":
			b.WriteString(" batch " + ev.BatchID)
		case ev.AccessID != "":
			b.WriteString(" access " + ev.AccessID)
		}
		for _, k := range []string{"queue", "collection"} {
			if v, ok := ev.Attrs[k].(string); ok {
				b.WriteString(" " + k + " " + v)
			}
		}
	default:
		b.WriteString(ev.Kind + " " + eventTransition(ev))
	}
	if ev.Actor != "" {
		b.WriteString("  by " + ev.Actor)
	}
	if ev.RecoveredBy != "" {
		// its host column is "-": the maker is unknown, the move found later
		b.WriteString("  recovered by " + ev.RecoveredBy)
	}
	if ev.Message != "" {
		b.WriteString("  [" + strings.Join(strings.Fields(ev.Message), " ") + "]")
	}
	var extra []string
	if ev.Priority != nil {
		extra = append(extra, "priority="+strconv.Itoa(*ev.Priority))
	}
	keys := make([]string, 0, len(ev.Attrs))
	for k := range ev.Attrs {
		if !(ev.Kind == events.KindAdmin && (k == "queue" || k == "collection")) && !reportList(ev, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		extra = append(extra, k+"="+attrValue(ev.Attrs[k]))
	}
	if len(extra) > 0 {
		b.WriteString("  " + strings.Join(extra, " "))
	}
	return b.String()
}

// reportList tells whether attribute k of a report event is one of its
// lists (successful_jobs, failed_jobs, failures, objects, failed_objects), which the text
// leaves to -o json: their lengths said what they were not ("objects=0"
// of a batch whose one job failed: objects are the stored ones), and the
// counts say how many jobs ended which way.
func reportList(ev events.Event, k string) bool {
	if ev.Kind != events.KindBatch {
		return false
	}
	if _, ok := ev.Attrs["successful_count"]; !ok {
		return false
	}
	switch k {
	case "successful_jobs", "failed_jobs", "failures", "objects", "failed_objects":
		return true
	}
	return false
}

func eventTransition(ev events.Event) string {
	if ev.From == "" {
		return "→ " + cmp.Or(ev.To, "?")
	}
	return ev.From + " → " + cmp.Or(ev.To, "?")
}

// attrValue renders an attribute: a list or a map by its length
// (successful_jobs=200, objects=200; -o json has them whole), anything else
// as text.
func attrValue(v any) string {
	switch x := v.(type) {
	case []any:
		return strconv.Itoa(len(x))
	case map[string]any:
		return strconv.Itoa(len(x))
	case []string:
		return strconv.Itoa(len(x))
	case string:
		if strings.ContainsAny(x, " \t\n\"") || x == "" {
			return strconv.Quote(x)
		}
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return textValue(v, "null")
}

// publishBestEffort publishes an operator's action on q and the moves it
// made (ops.Service.Publish). NATS unreachable or slow never changes the
// command's outcome: the change is made in ZooKeeper, which is the truth.
// But an operator's action whose event is not recorded is said on stderr
// when the command ends (closeAdmin), naming the NATS it tried: the
// record of who did what is lost for good (decision 245). A submission's
// event alone is only logged at debug: a depositor's machine need not
// reach the daemons' NATS.
func (a *app) publishBestEffort(q *queue.Queue, ev events.Event) {
	if ev.Host == "" {
		ev.Host, _ = os.Hostname()
	}
	if err := a.publishAdmin(q, ev); err != nil {
		a.log.Debug("event not sent (daemons notice the change on their next rescan)",
			"subject", ev.Subject(), "nats", a.natsShown(), "err", err)
		a.admin.notSent(ev, err)
	}
}

// adminPublisher is the CLI's connection for the events it publishes (and
// reads, for a request no longer in the queue): made for the first, kept
// for the command's life (a cancel may publish one per job); after a
// failure to connect, later events are not tried.
type adminPublisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	err error

	checkOnce  sync.Once
	otherQueue error                 // the stream records another queue's events: none is published
	denied     atomic.Pointer[error] // NATS refused a publish (a read token's): none more is tried

	mu       sync.Mutex
	lost     int   // events not recorded
	operator bool  // one of them an operator's action (an admin event)
	lastErr  error // why the last one was not
}

// notSent counts an event that was not recorded.
func (p *adminPublisher) notSent(ev events.Event, err error) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lost++
	p.operator = p.operator || ev.Kind == events.KindAdmin
	p.lastErr = err
}

func (a *app) publishAdmin(q *queue.Queue, ev events.Event) error {
	a.adminOnce.Do(func() { a.admin = a.dialAdmin() })
	if a.admin.err != nil {
		return a.admin.err
	}
	if denied := a.admin.denied.Load(); denied != nil {
		return *denied
	}
	if err := a.checkAdminStream(q); err != nil {
		return err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), announceDial)
	defer cancel()
	// Recorded in the stream when there is one; live subscribers (the
	// daemons) get it either way.
	if _, err := a.admin.js.Publish(ctx, ev.Subject(), data, jetstream.WithMsgID(ev.ID)); err != nil {
		// NATS refuses a publish (a read token's) in an error of its own,
		// which comes before the wait for the stream's answer ends.
		if denied := a.admin.nc.LastError(); errors.Is(denied, nats.ErrPermissionViolation) {
			a.admin.denied.Store(&denied) // the next events would be refused too
			return denied
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) && a.admin.nc.FlushTimeout(announceDial) == nil {
			return fmt.Errorf("delivered, but not recorded: %w", err)
		}
		return err
	}
	return nil
}

// checkAdminStream refuses, once a command, a stream that records another
// queue's events (events.CheckStream, as replay and the daemons check):
// that queue's daemons would take this queue's actions as their own and
// its replays show them under its ids (decision 385). A stream of no queue,
// none, or a queue or stream that cannot be read is published to as
// before: the publish says what went wrong.
func (a *app) checkAdminStream(q *queue.Queue) error {
	p := a.admin
	p.checkOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), announceDial)
		defer cancel()
		id, err := q.Identity(ctx)
		if err == nil {
			err = events.CheckStream(ctx, p.nc, "", id)
		}
		if errors.Is(err, events.ErrOtherQueue) {
			// The places may read the same (a ZooKeeper wiped, the same
			// root): the identities tell the queues apart.
			p.otherQueue = fmt.Errorf("%w, not this queue's (%s; its /batches made in %s)", err, a.queueAt(), id)
		}
	})
	return p.otherQueue
}

// queueAt says where the queue is, for people: the stream's metadata
// records it (events.Config.QueueAt).
func (a *app) queueAt() string {
	return fmt.Sprintf("ZooKeeper %s, root %s", a.zk, cmp.Or(a.root, "/"))
}

// recorded replays the recorded events (ops.Service.Recorded) on the admin
// events' connection. One not read is said: a removed access request is
// then not found rather than gone.
func (a *app) recorded(ctx context.Context, f events.Filter, fn func(events.Event) error) error {
	err := a.replayAdmin(ctx, f, fn)
	if err != nil {
		a.log.Warn("the recorded events were not read: what became of a request no longer in the queue is not known",
			"nats", a.natsShown(), "err", err)
	}
	return err
}

// replayAdmin is recorded, saying nothing of events not read: for a
// message whose words stand without them.
func (a *app) replayAdmin(ctx context.Context, f events.Filter, fn func(events.Event) error) error {
	a.adminOnce.Do(func() { a.admin = a.dialAdmin() })
	if a.admin.err != nil {
		return a.admin.err
	}
	return events.Replay(ctx, a.admin.nc, "", f, fn)
}

func (a *app) dialAdmin() *adminPublisher {
	nc, err := a.connectNATS(nats.Name("ingestq-cli"), nats.Timeout(announceDial), nats.NoReconnect(),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		return &adminPublisher{err: err}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return &adminPublisher{err: err}
	}
	return &adminPublisher{nc: nc, js: js}
}

// closeAdmin closes the admin events' connection, if one was made, and
// says so when an operator's action was not recorded.
func (a *app) closeAdmin() {
	a.adminOnce.Do(func() { a.admin = &adminPublisher{err: errors.New("closed")} })
	if a.admin.nc != nil {
		a.admin.nc.Close()
	}
	p := a.admin
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.operator || a.log == nil {
		return
	}
	why := fmt.Sprintf("NATS at %s did not take it; --nats or %s must name the daemon's NATS (its serve --nats-listen "+
		"address, or the cluster its --nats names)", a.natsShown(), EnvNATS)
	attrs := []any{"events_not_recorded", p.lost, "err", p.lastErr}
	if refused := a.natsRefusal(p.lastErr); refused != "" {
		why = refused
	} else if errors.Is(p.lastErr, events.ErrOtherQueue) {
		// The error is the whole why: not said twice.
		why, attrs = fmt.Sprintf("%v; --nats or %s must name this queue's NATS (its daemons' serve --nats-listen address, "+
			"or the cluster their --nats names)", p.lastErr, EnvNATS), attrs[:2]
	} else if p.nc != nil && (errors.Is(p.lastErr, context.DeadlineExceeded) || errors.Is(p.lastErr, nats.ErrTimeout)) {
		// It has the stream (else: no responders), which did not answer.
		why = fmt.Sprintf("NATS at %s is up, but its event stream did not answer (a NATS cluster electing a stream leader, "+
			"or one short of its quorum: see `ingestq hosts forget`; the daemons' /readyz says so)", a.natsShown())
	}
	a.log.Warn("the change is made, but its event is not recorded: "+why, attrs...)
}
