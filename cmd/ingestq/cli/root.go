// Package cli is the ingestq command line: `serve` runs the daemon, and
// every other command reads or administers the ingest queue kept in
// ZooKeeper, through reactor/queue and the service layer (package ops)
// that the HTTP API shares.
//
// Only the daemon makes the queue's folders (queue.Init), and submit once a
// submission is accepted; the other commands on the queue refuse a root
// with none, so a mistyped --zk-root creates nothing. A command does one
// thing and exits: 0 on success, 1 with one line "ingestq: <reason>" on
// stderr when ZooKeeper or the queue says no, 2 on a usage error, 3 when
// submit --wait's batch is removed or unreadable before it reports, 130
// when Ctrl-C stops a wait. Read commands print text, or JSON with -o json. Logs
// and warnings (unreadable nodes skipped by a listing) go to stderr through
// log/slog.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/internal/visible"
	"github.com/ingestq/ingestq/internal/zkconn"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
)

// Environment variables read for the global flags' defaults; a flag wins.
const (
	EnvZK             = "INGESTQ_ZK"
	EnvZKRoot         = "INGESTQ_ZK_ROOT"
	EnvLogLevel       = "INGESTQ_LOG_LEVEL"
	EnvConnectTimeout = "INGESTQ_CONNECT_TIMEOUT"
)

// LogTimeFormat is the time of every log line, the daemon's and the
// commands' alike: RFC 3339 to the millisecond, with the zone (decision 243).
const LogTimeFormat = "2006-01-02T15:04:05.000Z07:00"

const (
	defaultZK             = "127.0.0.1:2181"
	defaultConnectTimeout = 10 * time.Second
	// refusedPause is how long serve waits between tries of a ZooKeeper
	// that refuses connections (not started yet) at start.
	refusedPause   = 250 * time.Millisecond
	sessionTimeout = 10 * time.Second
	// A session not had within probeAfter has its servers asked whether
	// they are ZooKeeper at all; each has probeWait to answer (decision 231).
	probeAfter = 500 * time.Millisecond
	probeWait  = 2 * time.Second
)

// Main runs ingestq with the process environment and returns its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, args, stdout, stderr, os.Getenv)
}

// Run runs ingestq with args (without the program name), reading the
// environment through getenv, and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	logs := &gate{w: stderr}
	defer logs.shut()
	a := &app{stdout: stdout, stderr: stderr, logs: logs, getenv: getenv}
	root := a.rootCommand()
	if args == nil {
		args = []string{} // cobra would read os.Args instead
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(logs)
	// cobra's completion command, made now rather than at Execute (it takes
	// its output from root, set just above) so that it gets its examples.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			addExamples(c)
		}
	}
	err := root.ExecuteContext(ctx)
	a.close()
	if err == nil {
		return 0
	}
	code := 2 // cobra's own errors: unknown command, bad flag, wrong arguments
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.silent {
			return code
		}
	}
	// An error may quote what the queue holds (a name, a message, a path):
	// shown as stdout shows it.
	fmt.Fprintln(logs, "ingestq: "+visible.Text(oneLine(err.Error())))
	return code
}

// exitError carries an exit code; silent when the output already said why.
type exitError struct {
	code   int
	silent bool
	err    error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef is a usage error (exit 2) found by a command itself.
func usagef(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// oneLine keeps an error to the single line the CLI promises: cobra appends
// suggestions after a blank line, and those are dropped; the lines of a
// cause that spans several (a database driver's) are joined, not cut.
func oneLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n\n")
	return strings.Join(strings.Fields(first), " ")
}

// app is one invocation: its flags, streams and, once connected, its queue.
type app struct {
	stdout, stderr io.Writer
	logs           *gate // stderr for the logger
	getenv         func(string) string

	zk             string
	root           string
	nats           string
	natsFromEnv    bool          // --nats came from INGESTQ_NATS (serve may leave it to the CLI: decision 243)
	natsAuth       events.Config // credentials for --nats: CredsFile, Token, TLS*
	logLevel       string
	output         string
	connectTimeout time.Duration
	patient        bool         // serve: a ZooKeeper refusing connections is waited for (connectTimeout)
	quietLog       *slog.Logger // errors only: the log of serve's second ZooKeeper session

	log            *slog.Logger
	session        *zkwatch.Session
	sessionTimeout time.Duration   // serve's --zk-session-timeout; 0 = sessionTimeout
	admin          *adminPublisher // the connection for admin events, made by the first (adminOnce)
	adminOnce      sync.Once
}

func (a *app) env(name, def string) string {
	if v := a.getenv(name); v != "" {
		return v
	}
	return def
}

// user names who runs the command, for a submission's submitter and the
// record of an action: $USER, else the account's name (a root shell in a
// container may have no $USER), else "unknown".
func (a *app) user() string {
	if v := a.getenv("USER"); v != "" {
		return v
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// environmentHelp names every INGESTQ_* variable the CLI reads, by the
// flag whose default it gives (a flag given wins).
const environmentHelp = "Environment (a flag given wins over its variable):\n" +
	"  " + EnvZK + ", " + EnvZKRoot + ", " + EnvLogLevel + ": --zk, --zk-root, --log-level\n" +
	"  " + EnvConnectTimeout + ": how long to wait for a ZooKeeper session (default 10s)\n" +
	"  " + EnvNATS + ", " + EnvNATSToken + ", " + EnvNATSTLSCA + ": --nats, --nats-token, --nats-tls-ca (where events are)\n" +
	"  " + EnvAPI + ", " + EnvAPIToken + ": --api (the daemon's HTTP API, for object, audit and access\n" +
	"      request) and the token the CLI sends it\n" +
	"  " + EnvStalledAfter + ": --stalled-after (ls jobs, show, serve)\n" +
	"  " + EnvInventory + ", " + EnvDataDir + ": --inventory, --data-dir (serve, object, access request)\n" +
	"  " + EnvAccessThreshold + ": access request --threshold, serve --access-threshold\n" +
	"  serve's own (see ingestq serve --help): " + EnvConfig + ", " + EnvStates + ", " + EnvProfiles + ",\n" +
	"      " + EnvStorage + ", " + EnvWorkDir + ", " + EnvWorkShared + ", " + EnvHTTP + ", " + EnvAdvertise + ", " + EnvHTTPHosts + ",\n" +
	"      " + EnvTLSCert + ", " + EnvTLSKey + ", " + EnvAPITokens + ", " + EnvNATSListen + ",\n" +
	"      " + EnvListenCert + ", " + EnvListenKey + ", " + EnvMetricsAuth + ",\n" +
	"      " + EnvNATSCluster + ", " + EnvNATSSecret + ", " + EnvClusterCert + ",\n" +
	"      " + EnvClusterKey + ", " + EnvClusterCA + ", " + EnvSMTPPass + ", " + EnvAccessDir + ",\n" +
	"      " + EnvAccessTo + ", " + EnvFetchAllow + ";\n" +
	"      " + EnvAdminToken + " adds an admin token to the API's (it acts as \"" + api.EnvTokenName + "\")"

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:               "ingestq",
		Short:             "Inspect and administer the ingest queue kept in ZooKeeper",
		Long:              "ingestq reads and administers the ingest queue kept in ZooKeeper (the mrt-zk node layout).\n\n" + environmentHelp,
		Version:           versionText(),
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: func(*cobra.Command, []string) error { return a.setup() },
		Args:              cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q%s (see ingestq --help)", args[0], didYouMean(cmd, args[0]))
			}
			return usagef("missing command (see ingestq --help)")
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.zk, "zk", a.env(EnvZK, defaultZK), "ZooKeeper servers, host:port[,host:port…] (env "+EnvZK+")")
	pf.StringVar(&a.root, "zk-root", a.env(EnvZKRoot, ""), "node prefix of the queue, like /ingestq; empty for none (env "+EnvZKRoot+")")
	// Its environment variable is read in setup, not made the flag's
	// default: the help would show two defaults (decision 243).
	pf.StringVar(&a.nats, "nats", "", "NATS server URL(s); other commands: where events are (default nats://127.0.0.1:4222); serve: join it instead of embedding one (env "+EnvNATS+", which serve reads only when no --nats-listen or --nats-cluster is given)")
	pf.StringVar(&a.natsAuth.CredsFile, "nats-creds", "", "credentials file for --nats")
	pf.StringVar(&a.natsAuth.Token, "nats-token", a.env(EnvNATSToken, ""), "token for --nats: for a daemon's embedded NATS, one of its serve --api-tokens, unscoped (env "+EnvNATSToken+")")
	pf.StringVar(&a.natsAuth.TLSCA, "nats-tls-ca", a.env(EnvNATSTLSCA, ""), "CA file for --nats (env "+EnvNATSTLSCA+")")
	pf.StringVar(&a.natsAuth.TLSCert, "nats-tls-cert", "", "client certificate for --nats")
	pf.StringVar(&a.natsAuth.TLSKey, "nats-tls-key", "", "client key for --nats")
	pf.StringVar(&a.logLevel, "log-level", a.env(EnvLogLevel, "info"), "debug, info, warn or error (env "+EnvLogLevel+")")
	pf.StringVarP(&a.output, "output", "o", "text", "output format of read commands: text or json")
	timeout, err := time.ParseDuration(a.env(EnvConnectTimeout, defaultConnectTimeout.String()))
	if err != nil {
		timeout = -1 // reported by setup unless the flag is given
	}
	durationVar(pf, &a.connectTimeout, "connect-timeout", timeout, "how long to wait for a ZooKeeper session (env "+EnvConnectTimeout+")")
	_ = pf.MarkHidden("connect-timeout")

	root.AddCommand(a.treeCommand(), a.lsCommand(), a.showCommand(), a.objectCommand(), a.auditCommand(), a.checkCommand())
	root.AddCommand(a.holdCommands()...)
	hosts := a.hostsCommand()
	hosts.AddCommand(a.forgetCommand())
	root.AddCommand(a.holdsCommand(), hosts)
	root.AddCommand(a.requeueCommand(), a.failCommand(), a.deleteCommand(), a.reportCommand(), a.cancelCommand(), a.cleanupCommand())
	root.AddCommand(a.serveCommand())
	root.AddCommand(a.submitCommand(), a.eventsCommand(), a.demoCommand(), a.accessCommand())
	// "ingestq version", which people type, is --version (kept out of the list).
	root.AddCommand(&cobra.Command{Use: "version", Short: "Print the version (as --version)", Hidden: true, Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "ingestq version "+versionText())
		}})
	addExamples(root)
	hideSecretDefaults(root)
	return root
}

// secretFlags take a secret from their variable: --help must not print it
// as the flag's default (an operator's help pasted into a ticket, or read
// over a shoulder, gave away the NATS token and the SMTP password).
var secretFlags = []string{"nats-token", "smtp-password"}

// hideSecretDefaults keeps each flag's value from its variable but shows
// no default for a secret flag, and a default URL with its password or
// token masked (--inventory's postgres://USER:PASSWORD@…, a storage
// service's, --api's, --access-to's secret_key), as the logs show them.
func hideSecretDefaults(c *cobra.Command) {
	for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.LocalNonPersistentFlags(), c.Flags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			if slices.Contains(secretFlags, f.Name) {
				f.DefValue = ""
			} else {
				f.DefValue = redact.URLs(f.DefValue)
			}
		})
	}
	for _, sub := range c.Commands() {
		hideSecretDefaults(sub)
	}
}

// setup checks the global flags and makes the logger. A bad value is a
// usage error, found before any connection.
func (a *app) setup() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	logger := func(level slog.Level) *slog.Logger {
		return slog.New(tint.NewTextHandler(a.logs, &tint.Options{Level: level, TimeFormat: LogTimeFormat, NoColor: !isTerminal(a.stderr)}))
	}
	if a.nats == "" && a.getenv(EnvNATS) != "" {
		a.nats, a.natsFromEnv = a.getenv(EnvNATS), true
	}
	a.log = logger(level)
	// The operators' session of serve (decision 226) tells only its errors:
	// its outages and expiries are the daemon's own session's, told once.
	a.quietLog = logger(max(level, slog.LevelError)).With("session", "operators")
	switch a.output {
	case "text", "json":
	default:
		return usagef("--output %q: want text or json", a.output)
	}
	if a.root == "/" {
		a.root = ""
	}
	// ZooKeeper's own connect strings end with the chroot: host:port/root.
	if servers, chroot, ok := strings.Cut(a.zk, "/"); ok {
		chroot = "/" + strings.TrimSuffix(chroot, "/")
		switch {
		case chroot == "/":
		case a.root != "" && a.root != chroot:
			return usagef("--zk %q names the root %s, --zk-root says %s: give one", a.zk, chroot, a.root)
		default:
			a.root = chroot
		}
		a.zk = servers
	}
	if a.root != "" && (!strings.HasPrefix(a.root, "/") || strings.HasSuffix(a.root, "/") || path.Clean(a.root) != a.root) {
		return usagef("--zk-root %q: want an absolute path like /ingestq, without a trailing slash", a.root)
	}
	servers := zkwatch.ParseServers(a.zk)
	if len(servers) == 0 {
		return usagef("--zk is empty: want host:port[,host:port…]")
	}
	for _, srv := range servers {
		// A port out of range would only time out, after the connect timeout.
		_, port, err := net.SplitHostPort(srv)
		if n, perr := strconv.Atoi(port); err == nil && (perr != nil || n < 1 || n > 65535) {
			return usagef("--zk %q: port %q is not a number from 1 to 65535", srv, port)
		}
	}
	if a.connectTimeout <= 0 {
		return usagef("connect timeout %v (--connect-timeout or %s=%q): want a positive duration like 3s",
			a.connectTimeout, EnvConnectTimeout, a.getenv(EnvConnectTimeout))
	}
	return nil
}

// gate passes writes to w until shut, then drops them: the ZooKeeper
// client's goroutines may still log after its Close returns, and nothing
// may reach stderr once Run has returned.
type gate struct {
	mu   sync.Mutex
	w    io.Writer
	done bool
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gate) shut() {
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
}

// isTerminal tells whether w is a character device (a terminal), so logs
// are coloured only there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// queue connects and opens the queue; it writes nothing.
func (a *app) queue(ctx context.Context) (*queue.Queue, error) {
	s, q, err := a.dial(ctx)
	if err != nil {
		return nil, err
	}
	a.session = s
	return q, nil
}

// dial opens a ZooKeeper session and the queue on it; the caller closes
// the session.
func (a *app) dial(ctx context.Context) (*zkwatch.Session, *queue.Queue, error) {
	return a.dialLogging(ctx, a.log)
}

// dialLogging is dial with the session's own news (connection lost, back,
// expired) told to sessionLog.
func (a *app) dialLogging(ctx context.Context, sessionLog *slog.Logger) (*zkwatch.Session, *queue.Queue, error) {
	cfg := zkwatch.Config{Servers: zkwatch.ParseServers(a.zk), SessionTimeout: cmp.Or(a.sessionTimeout, sessionTimeout), Logger: sessionLog}
	dctx, cancel := context.WithTimeout(ctx, a.connectTimeout)
	defer cancel()
	s, err := dialZK(dctx, cfg, a.patient)
	if a.patient && errors.Is(err, zkwatch.ErrRefused) {
		// The daemon, started with (or just before) its ZooKeeper, waits for
		// it as long as the connect timeout; a command tells at once.
		a.log.Warn("ZooKeeper refuses connections; waiting for it", "zk", a.zk, "up_to", a.connectTimeout)
		for errors.Is(err, zkwatch.ErrRefused) && backoff.Sleep(dctx, refusedPause) {
			s, err = dialZK(dctx, cfg, a.patient)
		}
	}
	if errors.Is(err, zkwatch.ErrRefused) {
		return nil, nil, fmt.Errorf("cannot reach ZooKeeper at %s: connection refused, nothing listens there (is it running? --zk or INGESTQ_ZK say where)", a.zk)
	}
	if errors.Is(err, zkconn.ErrNotZooKeeper) {
		return nil, nil, fmt.Errorf("%v (is --zk, or INGESTQ_ZK, ZooKeeper's client port?)", err)
	}
	if err != nil {
		return nil, nil, err
	}
	// A daemon of this --host killed just now keeps its host node until its
	// session expires: a restart in its place waits for that (WithNameWait).
	q, err := queue.New(s.Conn, a.root, queue.WithLogger(a.log), queue.WithClosed(s.Closed),
		queue.WithNameWait(2*cmp.Or(a.sessionTimeout, sessionTimeout)))
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, q, nil
}

// dialZK is zkwatch.Dial, which waits for a session until ctx ends, except
// that servers giving no session within probeAfter are asked whether they
// are ZooKeeper at all: when none is, it ends at once with an error wrapping
// zkconn.ErrNotZooKeeper. An HTTP server, or a port that takes connections
// and says nothing, would otherwise hold a command for its connect timeout.
// patient (the daemon, which waits for a ZooKeeper starting beside it)
// takes silence for "not yet": only an answer that is not ZooKeeper's ends
// its wait early.
func dialZK(ctx context.Context, cfg zkwatch.Config, patient bool) (*zkwatch.Session, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		select {
		case <-time.After(probeAfter):
			if err := notZooKeeper(ctx, cfg.Servers, patient); err != nil {
				cancel(err)
			}
		case <-ctx.Done():
		}
	}()
	s, err := zkwatch.Dial(ctx, cfg)
	cause := context.Cause(ctx)
	cancel(nil)
	<-probed
	if err != nil && errors.Is(cause, zkconn.ErrNotZooKeeper) {
		return nil, cause
	}
	return s, err
}

// notZooKeeper probes every server; it returns an error naming those that
// are not ZooKeeper when none may be (each refuses, or is not ZooKeeper),
// else nil. patient: a server that says nothing may be one not ready yet.
func notZooKeeper(ctx context.Context, servers []string, patient bool) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() { errs[i] = zkconn.Probe(ctx, srv, probeWait) })
	}
	wg.Wait()
	var not []string
	for i, err := range errs {
		switch {
		case patient && errors.Is(err, zkconn.ErrSilent):
			return nil // cannot tell yet
		case errors.Is(err, zkconn.ErrNotZooKeeper):
			not = append(not, servers[i]+" takes connections but "+err.Error())
		case !errors.Is(err, syscall.ECONNREFUSED):
			return nil // a ZooKeeper, or cannot tell
		}
	}
	if len(not) == 0 {
		return nil
	}
	return notZKError(strings.Join(not, "; "))
}

// notZKError says which servers are not ZooKeeper; it is an
// zkconn.ErrNotZooKeeper.
type notZKError string

func (e notZKError) Error() string { return string(e) }
func (e notZKError) Unwrap() error { return zkconn.ErrNotZooKeeper }

// initQueue is queue, then makes sure the queue's folders exist: for the
// daemon, which puts work in (submit makes them once a submission is
// accepted).
func (a *app) initQueue(ctx context.Context) (*queue.Queue, error) {
	q, err := a.queue(ctx)
	if err != nil {
		return nil, err
	}
	if err := q.Init(ctx); err != nil {
		return nil, fmt.Errorf("zookeeper %s: prepare queue folders under %q: %w", a.zk, a.root, err)
	}
	return q, nil
}

// existingQueue is queue, for commands that read or administer a queue
// that must already be there: a mistyped --zk-root is said to be one, and
// nothing is created.
func (a *app) existingQueue(ctx context.Context) (*queue.Queue, error) {
	q, err := a.queue(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := q.Exists(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		root := cmp.Or(a.root, "/")
		return nil, fmt.Errorf("no ingestq queue under %s in ZooKeeper %s (nothing was ever submitted there: is --zk-root right?)", root, a.zk)
	}
	return q, nil
}

func (a *app) close() {
	a.closeAdmin()
	if a.session != nil {
		a.session.Close()
		a.session = nil
	}
}

// action makes a command's RunE on an existing queue: it connects, runs fn,
// and turns its error into exit 1 (unless fn chose another code).
func (a *app) action(fn func(ctx context.Context, q *queue.Queue, args []string) error) func(*cobra.Command, []string) error {
	return a.run(a.existingQueue, fn)
}

func (a *app) run(open func(context.Context) (*queue.Queue, error), fn func(ctx context.Context, q *queue.Queue, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		q, err := open(cmd.Context())
		if err == nil {
			err = fn(cmd.Context(), q, args)
		}
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return &exitError{code: 1, err: err}
	}
}

// args checks a command's positional arguments: the names are required,
// optional ones (in brackets) may be left out.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		required := 0
		for _, n := range names {
			if !strings.HasPrefix(n, "[") {
				required++
			}
		}
		switch {
		case len(got) < required:
			return usagef("%s: missing %s (usage: %s)", cmdPath(cmd), names[len(got)], cmd.UseLine())
		case len(got) > len(names):
			return usagef("%s: unexpected argument %q (usage: %s)", cmdPath(cmd), got[len(names)], cmd.UseLine())
		}
		return nil
	}
}

// group is the RunE of a command that only holds subcommands.
func group(cmd *cobra.Command, got []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(got) == 0 {
		return usagef("%s: missing what (one of: %s)", cmdPath(cmd), strings.Join(names, ", "))
	}
	return usagef("%s: unknown %q%s (one of: %s)", cmdPath(cmd), got[0], didYouMean(cmd, got[0]), strings.Join(names, ", "))
}

// cmdPath is a command's path without the program name: "ls jobs".
func cmdPath(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// println writes one line of a command's result to stdout, its string
// arguments (names, messages: what the queue holds) as visible.Text shows
// them, so that none moves the terminal's cursor or reorders the line.
func (a *app) println(format string, args ...any) {
	shown := make([]any, len(args))
	for i, v := range args {
		if s, ok := v.(string); ok {
			v = visible.Text(s)
		}
		shown[i] = v
	}
	fmt.Fprintf(a.stdout, format+"\n", shown...)
}

// warn reports a problem that does not stop the command.
func (a *app) warn(msg string, err error) {
	a.log.Warn(msg, tint.Err(err))
}

func (a *app) json() bool { return a.output == "json" }
