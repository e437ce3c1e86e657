package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Environment variables of the access commands (the threshold is serve's
// too).
const (
	EnvAccessThreshold = "INGESTQ_ACCESS_THRESHOLD"
	EnvAPI             = "INGESTQ_API"
)

const defaultAPI = "http://127.0.0.1:8080/api/v1"

func (a *app) accessCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "access request | ls | show | requeue | delete",
		Short: "Assemble stored objects into packages to download (the access queue)",
		Long: "access asks the daemons to assemble a stored object, one of its versions, or some of its files\n" +
			"into one zip or tar.gz package, and follows, lists and administers those requests. A request\n" +
			"goes to the small or the large access queue by its size, estimated from the inventory; each\n" +
			"queue has its own workers and its own hold (ingestq hold queue access-small|access-large).",
		Args: cobra.ArbitraryArgs,
		RunE: group,
	}
	cmd.AddCommand(a.accessRequestCommand(), a.accessListCommand(), a.accessShowCommand(),
		a.accessChangeCommand("requeue", "Send a Failed request back to be assembled again", (*ops.Service).RequeueAccess),
		a.accessChangeCommand("delete", "Delete a request: a Failed one becomes Deleted; a Completed or Deleted one is removed, its package at the next sweep",
			(*ops.Service).DeleteAccess))
	return cmd
}

// accessFlags are request's settings.
type accessFlags struct {
	version   int
	files     []string
	format    string
	wait      bool
	source    objectFlags
	threshold string
}

func (a *app) accessRequestCommand() *cobra.Command {
	var f accessFlags
	var threshold profile.ByteSize
	cmd := &cobra.Command{
		Use:   "request ARK [--version N] [--file PATH…] [--format zip|tar.gz] [--wait]",
		Short: "Ask for a package of a stored object, a version, or some files; prints the request's ref",
		Long: "request queues the assembly of ARK: every version (each in its folder v1/, v2/, …), or one\n" +
			"version (--version), or some files (--file, repeatable; of --version, else of the latest).\n" +
			"The size is estimated from the inventory, read as ingestq object reads it: --inventory, else\n" +
			"the embedded one in --data-dir when given (while its daemon holds it, or when there is none,\n" +
			"the daemon's API), else the daemon's HTTP API at --api.\n" +
			"Above --threshold the request goes to the large queue. It prints the request's ref\n" +
			"(small/qid…); --wait follows it and prints where the package is: exit 0 when it is ready,\n" +
			"1 when it failed.",
		Args: args("ARK"),
		// The flags are checked before connecting; a bad one is a usage
		// error, as submit's are.
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			f.source.given(cmd, a.getenv)
			if threshold, err = profile.ParseByteSize(f.threshold); err != nil {
				return usagef("access request: --threshold %v", err)
			}
			// A --version given is one version: 0 is none, as the API's
			// "version": 0, not a second way to ask for every version.
			if cmd.Flags().Changed("version") && f.version < 1 {
				return usagef("access request: --version %d: want 1 or more (leave --version out for every version)", f.version)
			}
			err = ops.CheckAccessRequest(ops.AccessRequest{ARK: args[0], Version: f.version, Files: f.files, Format: f.format})
			var fe *ops.FieldError
			if !errors.As(err, &fe) {
				return err
			}
			name := "--" + fe.Field
			if fe.Field == "ark" {
				name = "ARK"
			}
			return usagef("access request: %s", fe.Named(name))
		},
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			inv, done, err := a.objectSource(ctx, f.source)
			if err != nil {
				return err
			}
			defer done()
			s := a.ops(q)
			s.Inventory, s.AccessThreshold = inv, int64(threshold)
			v, err := s.RequestAccess(ctx, ops.AccessRequest{ARK: args[0], Version: f.version, Files: f.files, Format: f.format,
				RequestedBy: a.user()})
			if err != nil && (inv.missed || errors.Is(err, queue.ErrNotFound)) {
				return fmt.Errorf("%w (the inventory read: %s)", err, inv.name)
			}
			if err != nil {
				return err
			}
			if !f.wait {
				if a.json() {
					return a.writeJSON(v)
				}
				a.println("%s", v.Ref)
				return nil
			}
			return a.waitAccess(ctx, q, v)
		}),
	}
	fl := cmd.Flags()
	fl.IntVar(&f.version, "version", 0, "one version of the object (default: every version, or the latest with --file)")
	fl.StringArrayVar(&f.files, "file", nil, "a file of the object, as stored (producer/…); repeat for more")
	fl.StringVar(&f.format, "format", queue.FormatZip, "the package: zip or tar.gz")
	fl.BoolVar(&f.wait, "wait", false, "follow the request; print where the package is when it is ready")
	a.objectFlagSet(fl, &f.source, "the inventory to estimate the size from")
	fl.StringVar(&f.threshold, "threshold", a.env(EnvAccessThreshold, "1GiB"), "estimated size above which a request goes to the large queue (env "+EnvAccessThreshold+")")
	return cmd
}

// waitAccess follows a request until it is Completed (exit 0, the
// package's URL printed) or Failed (exit 1), by a watch on its status. Its
// progress goes to stderr as plain lines, as submit --wait's does: stdout
// holds only the result.
func (a *app) waitAccess(ctx context.Context, q *queue.Queue, v ops.AccessView) error {
	last := queue.State("")
	for {
		fired, _, err := q.WatchOnce(ctx, q.AccessWait(v.Queue, v.ID))
		if err != nil {
			return err
		}
		if v, err = a.ops(q).ShowAccess(ctx, v.Ref); err != nil {
			return err
		}
		if v.State != last {
			a.accessProgress(ctx, q, v, last == "")
			last = v.State
		}
		switch v.State {
		case queue.Completed:
			return a.printAccess(ctx, q, v)
		case queue.Failed, queue.Deleted:
			return &exitError{code: 1, err: fmt.Errorf("access request %s %s: %s", v.Ref, v.State, v.Message)}
		}
		select {
		case <-fired:
		case <-ctx.Done():
			return &exitError{code: 130, err: fmt.Errorf("stopped waiting; access request %s goes on (ingestq access show %s)", v.Ref, v.Ref)}
		}
	}
}

// accessProgress tells on stderr where a waited-for request stands; the
// first time, with its estimate and the hold of its queue, if any.
func (a *app) accessProgress(ctx context.Context, q *queue.Queue, v ops.AccessView, first bool) {
	if !first {
		fmt.Fprintf(a.stderr, "%s: %s\n", v.Ref, v.State)
		return
	}
	fmt.Fprintf(a.stderr, "%s: %s, estimated %s\n", v.Ref, v.State, humanize.IBytes(uint64(v.Token.ContentBytes)))
	if v.State != queue.Pending {
		return
	}
	if h, err := a.ops(q).AccessHold(ctx, v.Queue); err == nil && h != nil {
		a.note("%s", accessHeld{*h})
	}
}

func (a *app) accessListCommand() *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "ls [--state S]",
		Short: "List the access requests of both queues",
		Args:  args(),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, _ []string) error {
			var st queue.State
			if state != "" {
				var err error
				if st, err = ops.ParseAccessState(state); err != nil {
					return usagef("--state: %v", err)
				}
			}
			list, problems, err := a.ops(q).ListAccess(ctx, st)
			if err != nil {
				return err
			}
			for _, p := range problems {
				a.warn("skipping an unreadable access request", p)
			}
			if a.json() {
				for i := range list {
					list[i].LastModified = queue.JSONTime(list[i].LastModified)
				}
				return a.writeJSON(list)
			}
			defer a.noteAccessHolds(ctx, q, list)
			if len(list) == 0 {
				a.println(noneOf("access requests", string(st), false))
				return nil
			}
			t := a.newTable("REF", "STATUS", "ARK", "WHAT", "FORMAT", "SIZE", "LAST MODIFIED", "MESSAGE")
			for _, v := range list {
				t.row(v.Ref, string(v.State), v.Token.ARK, accessWhat(v.Token), v.Token.Format, accessSize(v.Token),
					nodeTime(v.LastModified).String(), truncate(v.Message, 60))
			}
			return t.flush()
		}),
	}
	cmd.Flags().Var(once(&state), "state", "only requests in this state: Pending, Processing, Completed, Failed or Deleted")
	return cmd
}

// noteAccessHolds says on stderr why Pending requests are not taken, as
// ls batches does for batches: their queue is held.
func (a *app) noteAccessHolds(ctx context.Context, q *queue.Queue, list []ops.AccessView) {
	for _, name := range queue.AccessQueues {
		if !slices.ContainsFunc(list, func(v ops.AccessView) bool { return v.Queue == name && v.State == queue.Pending }) {
			continue
		}
		if h, err := a.ops(q).AccessHold(ctx, name); err == nil && h != nil {
			a.note("%s", accessHeld{*h})
		}
	}
}

func (a *app) accessShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show REF",
		Short: "Show an access request: what it asks for, and where its package is",
		Long: "show prints an access request: what it asks for, its state, and where its package is. One\n" +
			"no longer in the queue that the event stream recorded is gone (exit 1, as the API's 410): what\n" +
			"became of it, by whom and when; requeue and delete say the same of it.",
		Args: args("REF"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			v, err := a.ops(q).ShowAccess(ctx, args[0])
			if err != nil {
				// One no longer in the queue is gone, as in the API, when the events tell it was made.
				return a.ops(q).AccessGone(ctx, args[0], v, err)
			}
			v.Unreachable = a.ops(q).Unreachable(ctx, v)
			return a.printAccess(ctx, q, v)
		}),
	}
}

// accessHeld is an access queue's hold as the access commands show it: a
// sentence in text, the hold (kind, name, since) in JSON.
type accessHeld struct{ queue.Hold }

func (h accessHeld) String() string {
	alias := map[string]string{queue.QueueAccessSmall: "access-small", queue.QueueAccessLarge: "access-large"}[h.Name]
	return fmt.Sprintf("queue %s is held since %s: it takes no new request until released (ingestq release queue %s)",
		h.Name, when(h.Since), alias)
}

// printAccess prints a request as a record, with the hold of its queue
// (null when there is none).
func (a *app) printAccess(ctx context.Context, q *queue.Queue, v ops.AccessView) error {
	hold, err := a.ops(q).AccessHold(ctx, v.Queue)
	if err != nil {
		return err
	}
	var held any // null when its queue is not held
	if hold != nil {
		held = accessHeld{*hold}
	}
	if a.json() {
		v.LastModified = queue.JSONTime(v.LastModified)
		return a.writeJSON(struct {
			ops.AccessView
			Held any `json:"held"`
		}{v, held})
	}
	t := v.Token
	fields := []field{{"ref", v.Ref}, {"status", string(v.State)}, {"held", held}, {"message", v.Message}, {"last_modified", nodeTime(v.LastModified)},
		{"ark", t.ARK}, {"what", accessWhat(t)}, {"format", t.Format}, {"estimated", humanize.IBytes(uint64(t.ContentBytes))},
		{"requested", nodeTime(t.Requested)}, {"requested_by", t.RequestedBy}, {"url", t.URL}}
	if h := v.Holder; h != nil && v.State == queue.Processing {
		fields = append(fields, field{"assembling_on", h.Host})
	}
	if p := t.Package; p != nil {
		fields = append(fields, field{"size", accessSize(t)}, field{"sha256", p.SHA256}, field{"entries", p.Entries},
			field{"expires", nodeTime(p.Expires)}, field{"where", p.Where + " " + p.Location + " (" + p.Host + ")"})
	}
	if v.Unreachable != "" {
		fields = append(fields, field{"unreachable", v.Unreachable})
	}
	return a.writeFields(fields)
}

// accessWhat says what a request asks for: nothing of ingestq's when its
// token names no ARK (another tool's request, like Merritt's own).
func accessWhat(t queue.AccessToken) string {
	if t.ARK == "" {
		return ""
	}
	files := fmt.Sprintf("%d files", len(t.Files))
	if len(t.Files) == 1 {
		files = "1 file"
	}
	switch {
	case len(t.Files) > 0 && t.Version > 0:
		return fmt.Sprintf("%s of v%d", files, t.Version)
	case len(t.Files) > 0:
		return files + " of the latest"
	case t.Version > 0:
		return "version " + strconv.Itoa(t.Version)
	}
	return "every version"
}

func accessSize(t queue.AccessToken) string {
	if t.Package == nil {
		return ""
	}
	return humanize.IBytes(uint64(t.Package.Size))
}

func (a *app) accessChangeCommand(verb, short string, change func(*ops.Service, context.Context, string) (ops.Outcome, error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " REF",
		Short: short,
		Args:  args("REF"),
		RunE: a.action(func(ctx context.Context, q *queue.Queue, args []string) error {
			o, err := change(a.ops(q), ctx, args[0])
			if err != nil {
				err = a.ops(q).AccessGone(ctx, args[0], ops.AccessView{}, err)
			}
			return a.printOutcome(o, err)
		}),
	}
}
