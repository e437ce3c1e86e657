package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/dashboard"
	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/audit"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Environment variables of the daemon.
const (
	EnvNATS        = "INGESTQ_NATS"
	EnvNATSListen  = "INGESTQ_NATS_LISTEN"
	EnvNATSCluster = "INGESTQ_NATS_CLUSTER"
	EnvNATSSecret  = "INGESTQ_NATS_CLUSTER_SECRET_FILE"
	EnvClusterCert = "INGESTQ_NATS_CLUSTER_TLS_CERT"
	EnvClusterKey  = "INGESTQ_NATS_CLUSTER_TLS_KEY"
	EnvClusterCA   = "INGESTQ_NATS_CLUSTER_TLS_CA"
	EnvListenCert  = "INGESTQ_NATS_LISTEN_TLS_CERT"
	EnvListenKey   = "INGESTQ_NATS_LISTEN_TLS_KEY"
	EnvNATSTLSCA   = "INGESTQ_NATS_TLS_CA" // the CA the CLI trusts for --nats (--nats-tls-ca)
	EnvDataDir     = "INGESTQ_DATA_DIR"
	EnvConfig      = "INGESTQ_CONFIG"
	EnvProfiles    = "INGESTQ_PROFILES"
	EnvStorage     = "INGESTQ_STORAGE"
	EnvWorkDir     = "INGESTQ_WORK_DIR"
	EnvWorkShared  = "INGESTQ_WORK_SHARED"
	EnvFetchAllow  = "INGESTQ_FETCH_ALLOW"
	EnvInventory   = "INGESTQ_INVENTORY"
	EnvSMTPPass    = "INGESTQ_SMTP_PASSWORD"
	EnvNATSToken   = "INGESTQ_NATS_TOKEN"
	EnvStates      = "INGESTQ_STATES"
	EnvHTTP        = "INGESTQ_HTTP"
	EnvAdvertise   = "INGESTQ_ADVERTISE"
	EnvHTTPHosts   = "INGESTQ_HTTP_HOSTS"
	EnvTLSCert     = "INGESTQ_TLS_CERT"
	EnvTLSKey      = "INGESTQ_TLS_KEY"
	EnvAPITokens   = "INGESTQ_API_TOKENS"
	EnvMetricsAuth = "INGESTQ_METRICS_AUTH"
	EnvAPIToken    = "INGESTQ_API_TOKEN"   // the token the CLI's commands send to the API
	EnvAdminToken  = "INGESTQ_ADMIN_TOKEN" // serve: one more token, an admin's (api.EnvTokenName)
)

// tlsFiles are the files of a TLS setting: a certificate, its key, a CA.
type tlsFiles struct{ cert, key, ca string }

// serveFlags are the daemon's settings.
type serveFlags struct {
	dataDir      string
	natsListen   string
	natsCluster  string
	natsSecret   string   // the file of --nats-cluster's secret
	clusterTLS   tlsFiles // --nats-cluster-tls-cert, -key and -ca
	listenTLS    tlsFiles // --nats-listen-tls-cert and -key
	embedGiven   bool     // --nats-listen or --nats-cluster was given (not their defaults)
	host         string
	config       string
	pipeline     string
	states       string
	http         string
	advertise    string
	httpHosts    string
	stalledAfter string
	apiTLS       tlsFiles // --tls-cert and --tls-key
	apiTokens    string
	metricsAuth  string // open or token
	delay        time.Duration
	workers      int
	stateWorkers map[string]int
	stateTries   map[string]int
	batchWorkers int
	window       int
	attempts     int
	backoff      time.Duration
	rescan       time.Duration
	foreign      bool
	grace        time.Duration
	maxAge       time.Duration
	ingest       ingestFlags
	access       accessServeFlags
}

func (a *app) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: watch the queue and work its batches and jobs",
		Long: "serve runs the ingest daemon. ZooKeeper child watchers on the queue's folders signal\n" +
			"worker pools over NATS; every change is published and recorded as an event.\n\n" +
			"The ingest pipeline (the default) reads each batch's payload (a checkm manifest, a zip or a\n" +
			"file), downloads and verifies the objects' files into --data-dir/work, gives each object an\n" +
			"ARK, stores it (--data-dir/ocfl, or --storage, or the profile's endpoint), records it in the\n" +
			"inventory (--data-dir/inventory.db, or an endpoint), calls the profile's callback and\n" +
			"reports each batch (by e-mail with --smtp). Profiles come from --profiles (one YAML file per\n" +
			"collection; default the built-in demo profile) and are published in ZooKeeper for submit.\n\n" +
			"--states names the states this daemon works (default all); other daemons or programs on the\n" +
			"same queue work the rest. The HTTP server (--http) serves each job's storage manifest, its files\n" +
			"and its inventory manifest at the URLs written into the job (--advertise), so that whoever\n" +
			"works Storing and Recording can read them from another host, and the REST API under /api/v1\n" +
			"(its bearer tokens in --api-tokens; HTTPS with --tls-cert and --tls-key). It answers only a\n" +
			"request whose Host it is reached by (IP addresses, localhost, this machine's name, the --http and\n" +
			"--advertise hosts, --http-hosts), so that no web page on another name can read it (DNS rebinding).\n\n" +
			"NATS: by default an embedded server (JetStream store under --data-dir) listening on\n" +
			"--nats-listen for the CLI and outside subscribers; with --nats-cluster the daemons'\n" +
			"embedded servers form one NATS cluster by themselves (routes announced in ZooKeeper),\n" +
			"so every host's events are in one stream; --nats URL joins an existing server or\n" +
			"cluster instead. INGESTQ_NATS, where the CLI finds events, is read by serve as --nats only\n" +
			"when neither --nats-listen nor --nats-cluster is given and it names no address of the\n" +
			"embedded server's own. Settings come from flags, then INGESTQ_* variables, then --config\n" +
			"(a YAML file of flag names and values, with ${VAR} expanded), then the defaults.\n\n" +
			"One daemon per --data-dir: serve holds <data-dir>/serve.lock while it runs, and a second\n" +
			"daemon on the same folder is refused, naming the first.\n\n" +
			"SIGTERM or SIGINT: stop taking work, let running steps finish within --grace, then\n" +
			"cancel them and close the session; a second signal exits at once. SIGHUP (systemctl\n" +
			"reload) re-reads --api-tokens and the TLS certificates, keys and CAs given (--tls-cert, --nats-listen-tls-cert,\n" +
			"--nats-cluster-tls-cert and -ca, --nats-tls-ca with --nats), and nothing else: a certificate renewed is served\n" +
			"to the next handshakes, a CA file renewed verifies the next handshakes' peers.",
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyConfig(cmd.Flags(), f.config, a.getenv); err != nil {
				return usagef("%v", err)
			}
			// A setting of the embedded NATS server given by flag, variable or
			// --config (applyConfig marks what it sets as changed).
			f.embedGiven = cmd.Flags().Changed("nats-listen") || cmd.Flags().Changed("nats-cluster") ||
				a.getenv(EnvNATSListen) != "" || a.getenv(EnvNATSCluster) != ""
			return a.serve(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", a.env(EnvDataDir, defaultDataDir(a.getenv)), "local state: the embedded NATS store, working folders, built-in storage and inventory (env "+EnvDataDir+")")
	fl.StringVar(&f.natsListen, "nats-listen", a.env(EnvNATSListen, "127.0.0.1:4222"), "embedded NATS listener for the CLI and subscribers; \"off\" for none (env "+EnvNATSListen+")")
	fl.StringVar(&f.listenTLS.cert, "nats-listen-tls-cert", a.env(EnvListenCert, ""), "certificate (chain, PEM) of --nats-listen, with --nats-listen-tls-key: the listener then takes TLS only (the CLI\n"+
		"trusts it with --nats-tls-ca or "+EnvNATSTLSCA+"); it must name the address its clients dial, 127.0.0.1 for the CLI on this host; default none (env "+EnvListenCert+")")
	fl.StringVar(&f.listenTLS.key, "nats-listen-tls-key", a.env(EnvListenKey, ""), "key (PEM) of --nats-listen-tls-cert (mode 600; env "+EnvListenKey+")")
	fl.StringVar(&f.natsCluster, "nats-cluster", a.env(EnvNATSCluster, ""), "HOST:PORT where the embedded NATS listens for the other daemons' servers: they form one NATS cluster (one event stream, 3 replicas from 3 hosts); an unspecified HOST (0.0.0.0) is announced as the host name; default off (env "+EnvNATSCluster+")")
	fl.StringVar(&f.natsSecret, "nats-cluster-secret-file", a.env(EnvNATSSecret, ""), "file of the secret of --nats-cluster's routes, one line of 16 characters or more, the same on every host\n"+
		"(openssl rand -hex 32; mode 600): a route into this server must present it, and the routes it dials present it; default none: routes unauthenticated (env "+EnvNATSSecret+")")
	fl.StringVar(&f.clusterTLS.cert, "nats-cluster-tls-cert", a.env(EnvClusterCert, ""), "certificate (chain, PEM) of this host on --nats-cluster's routes, with --nats-cluster-tls-key and -ca: the routes are then\n"+
		"mutual TLS; it must name the host --nats-cluster announces and be good for serverAuth and clientAuth; default none: routes in clear (env "+EnvClusterCert+")")
	fl.StringVar(&f.clusterTLS.key, "nats-cluster-tls-key", a.env(EnvClusterKey, ""), "key (PEM) of --nats-cluster-tls-cert (mode 600; env "+EnvClusterKey+")")
	fl.StringVar(&f.clusterTLS.ca, "nats-cluster-tls-ca", a.env(EnvClusterCA, ""), "the CA (PEM) that signed every host's --nats-cluster-tls-cert, the same on every host: a route is taken, and a server dialed,\n"+
		"only with a certificate it signed; a CA of the cluster's own, not a public one; while a CA is replaced, both, one after the other (env "+EnvClusterCA+")")
	fl.StringVar(&f.host, "host", "", "this daemon's name in events and logs (default the host name)")
	fl.StringVar(&f.config, "config", a.env(EnvConfig, ""), "YAML file of settings (env "+EnvConfig+")")
	fl.StringVar(&f.pipeline, "pipeline", "ingest", "handlers: ingest (the real pipeline); rehearse (the real payload reading and reports, every job step a no-op: try a big batch without downloading or storing); or passthrough (batches are submitted as passthrough:N, N jobs whose every step succeeds; for tests and benchmarks)")
	fl.StringVar(&f.states, "states", a.env(EnvStates, "all"), "the states this daemon works, comma-separated: job states ("+reactor.RoleNames(reactor.AllRoles()[:len(reactor.JobStates)])+"),\n"+
		"intake (pending batches → jobs) and reporting (batch reports); others are left to other daemons or programs on the queue (env "+EnvStates+")")
	fl.StringVar(&f.http, "http", a.env(EnvHTTP, "127.0.0.1:8080"), "the daemon's HTTP server (host:port; port 0 picks a free one; \"off\" for none): it serves each job's storage manifest,\n"+
		"its files and its inventory manifest to whoever works Storing and Recording (env "+EnvHTTP+")")
	fl.StringVar(&f.advertise, "advertise", a.env(EnvAdvertise, ""), "the URL other hosts reach --http at, in the jobs' manifest URLs (env "+EnvAdvertise+";\n"+
		"default http://HOST:PORT: the --http host, or this machine's name when --http listens on every interface)")
	fl.StringVar(&f.httpHosts, "http-hosts", a.env(EnvHTTPHosts, ""), "further names --http answers to as Host, comma-separated: a proxy's public name, DNS aliases, Prometheus targets;\n"+
		"*.example.org for every name under example.org; * for every Host (unsafe: DNS rebinding reaches the server). Always answered: IP\n"+
		"addresses, localhost, this machine's name and its short form, the --http and --advertise hosts; any other is refused, 421 (env "+EnvHTTPHosts+")")
	fl.StringVar(&f.stalledAfter, "stalled-after", a.env(EnvStalledAfter, ""), stalledAfterUsage())
	fl.StringVar(&f.apiTLS.cert, "tls-cert", a.env(EnvTLSCert, ""), "certificate (chain, PEM) of --http: it serves HTTPS only, with --tls-key (env "+EnvTLSCert+")")
	fl.StringVar(&f.apiTLS.key, "tls-key", a.env(EnvTLSKey, ""), "key (PEM) of --tls-cert (env "+EnvTLSKey+")")
	fl.StringVar(&f.apiTokens, "api-tokens", a.env(EnvAPITokens, ""), "file of the HTTP API's bearer tokens, a line each: ROLE[:PROFILE,…] TOKEN [NAME], ROLE read, operate or admin\n"+
		"(a read or operate token scoped to PROFILEs sees and acts on only their work);\n"+
		"without any token reads are open and changes refused ("+EnvAdminToken+" adds an admin token; env "+EnvAPITokens+");\n"+
		"SIGHUP re-reads it: tokens are added or revoked without a restart")
	fl.StringVar(&f.metricsAuth, "metrics-auth", a.env(EnvMetricsAuth, "open"), "who may read /metrics: open (anyone who reaches --http, as Prometheus expects), or token (a bearer token\n"+
		"of --api-tokens or "+EnvAdminToken+", of any role and no profiles: Prometheus's authorization: credentials_file) (env "+EnvMetricsAuth+")")
	durationVar(fl, &f.delay, "passthrough-delay", 0, "time each pass-through step takes")
	fl.IntVar(&f.workers, "workers", reactor.DefaultWorkers, "workers per job state")
	fl.StringToIntVar(&f.stateWorkers, "state-workers", nil, "workers of some states, like downloading=8,processing=2 (default --workers)")
	fl.StringToIntVar(&f.stateTries, "state-attempts", nil, "tries of some states' steps, like downloading=5 (default --attempts)")
	fl.IntVar(&f.batchWorkers, "batch-workers", reactor.Defaults.BatchWorkers, "workers for pending batches and for reports, each")
	fl.IntVar(&f.window, "batch-window", reactor.Defaults.Window, "a batch of more objects has its jobs made this many at a time, and its Completed jobs archived (no state folder grows past what Merritt's Java clients can list)")
	fl.IntVar(&f.attempts, "attempts", reactor.Defaults.Attempts, "tries of a step before its job fails")
	durationVar(fl, &f.backoff, "backoff", reactor.Defaults.Backoff, "wait before the first retry, doubled each time (at most 1m)")
	durationVar(fl, &f.rescan, "rescan", reactor.Defaults.Rescan, "safety rescan of every folder")
	fl.BoolVar(&f.foreign, "foreign-events", true, "record the job moves another program (Merritt's services) makes on the queue as events: every job state\n"+
		"folder but Pending is watched, and each job whose ref appears in one this daemon does not work is read (--foreign-events=false: only\n"+
		"ingestq's moves are recorded, and moves into the states this daemon works as it moves the jobs on)")
	durationVar(fl, &f.grace, "grace", reactor.Defaults.Grace, "how long running steps may finish at shutdown")
	durationVar(fl, &a.sessionTimeout, "zk-session-timeout", sessionTimeout, "ZooKeeper session timeout: how long a dead daemon keeps its locks")
	durationVar(fl, &f.maxAge, "events-max-age", 7*24*time.Hour, "how long recorded events are kept")
	a.ingestFlagSet(fl, &f.ingest)
	a.accessFlagSet(fl, &f.access)
	return cmd
}

// defaultDataDir is where the daemon keeps its state unless told: the XDG
// state folder ($XDG_STATE_HOME/ingestq, else ~/.local/state/ingestq), so
// that it lands neither in whatever folder serve was started from nor in a
// repository. Without a home, ./ingestq-data.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "ingestq")
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "state", "ingestq")
	}
	return "ingestq-data"
}

// applyConfig sets, from a YAML file, every flag not given on the command
// line nor by its environment variable. ${VAR} in values is expanded.
func applyConfig(fl *pflag.FlagSet, file string, getenv func(string) string) error {
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var settings map[string]any
	if err := yaml.Unmarshal([]byte(os.Expand(string(data), getenv)), &settings); err != nil {
		return fmt.Errorf("--config %s: %w", file, err)
	}
	envOf := map[string]string{"zk": EnvZK, "zk-root": EnvZKRoot, "log-level": EnvLogLevel, "nats": EnvNATS,
		"data-dir": EnvDataDir, "nats-listen": EnvNATSListen, "nats-cluster": EnvNATSCluster, "nats-cluster-secret-file": EnvNATSSecret,
		"nats-cluster-tls-cert": EnvClusterCert, "nats-cluster-tls-key": EnvClusterKey, "nats-cluster-tls-ca": EnvClusterCA,
		"nats-listen-tls-cert": EnvListenCert, "nats-listen-tls-key": EnvListenKey, "nats-tls-ca": EnvNATSTLSCA, "profiles": EnvProfiles, "smtp-password": EnvSMTPPass, "nats-token": EnvNATSToken,
		"storage": EnvStorage, "inventory": EnvInventory, "states": EnvStates, "http": EnvHTTP, "advertise": EnvAdvertise, "http-hosts": EnvHTTPHosts,
		"work-dir": EnvWorkDir, "work-shared": EnvWorkShared, "fetch-allow": EnvFetchAllow, "stalled-after": EnvStalledAfter, "tls-cert": EnvTLSCert, "tls-key": EnvTLSKey, "api-tokens": EnvAPITokens,
		"metrics-auth": EnvMetricsAuth, "access-dir": EnvAccessDir, "access-to": EnvAccessTo, "access-threshold": EnvAccessThreshold}
	for name, v := range settings {
		flag := fl.Lookup(name)
		if flag == nil {
			return fmt.Errorf("--config %s: unknown setting %q (settings are flag names, like data-dir)", file, name)
		}
		if flag.Changed || (envOf[name] != "" && getenv(envOf[name]) != "") {
			continue
		}
		if err := fl.Set(name, fmt.Sprint(v)); err != nil { // marks it Changed, as a flag given
			return fmt.Errorf("--config %s: %s: %w", file, name, err)
		}
	}
	return nil
}

func (a *app) serve(ctx context.Context, f serveFlags) error {
	if !slices.Contains([]string{"ingest", "rehearse", "passthrough"}, f.pipeline) {
		return usagef("--pipeline %q: want ingest, rehearse or passthrough", f.pipeline)
	}
	roles, err := parseStates(f.states)
	if err != nil {
		return usagef("--states: %v", err)
	}
	stalledAfter, err := parseStalledAfter(f.stalledAfter)
	if err != nil {
		return err
	}
	tokens, err := a.loadTokens(f.apiTokens)
	if err != nil {
		return err
	}
	metricsToken, err := parseMetricsAuth(f.metricsAuth, tokens)
	if err != nil {
		return err
	}
	secret, err := a.clusterSecret(f)
	if err != nil {
		return err
	}
	clusterTLS, clusterCert, clusterCA, err := a.clusterTLS(f)
	if err != nil {
		return err
	}
	listenTLS, listenCert, err := a.listenTLS(f)
	if err != nil {
		return err
	}
	apiCert, err := a.apiTLS(f)
	if err != nil {
		return err
	}
	a.settleNATS(f) // before natsCA: whether serve joins another NATS
	natsCA, err := a.natsCA()
	if err != nil {
		return err
	}
	var busMade atomic.Pointer[events.Bus] // once made: a reload disconnects its clients whose token changed, gives its routes a CA changed
	certs := servedCerts(servedCert{"--nats-cluster-tls-", clusterCert}, servedCert{"--nats-listen-tls-", listenCert}, servedCert{"--tls-", apiCert})
	cas := servedCAs(servedCA{"--nats-cluster-tls-", clusterCA, func() { busMade.Load().ClusterCAReloaded() }}, servedCA{"--nats-tls-", natsCA, nil})
	// At once: the unit's ExecReload sends SIGHUP, whose default ends the
	// process, and systemd does not restart a daemon a HUP ended.
	defer a.reloadOnHUP(f.apiTokens, tokens, func() { busMade.Load().ClientTokensChanged() }, certs, cas)()
	if err := os.MkdirAll(f.dataDir, 0o750); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("--data-dir: %w", err)}
	}
	dataDir, _ := filepath.Abs(f.dataDir)
	if f.host == "" {
		// One name for the reactor and the pipeline: the steps a job's
		// files bind to a host are found by it.
		f.host, _ = os.Hostname()
	}
	lock, err := lockDataDir(dataDir, fmt.Sprintf("--host %s, --zk %s, --zk-root %s, --http %s", f.host, a.zk, cmp.Or(a.root, "/"), f.http))
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer lock.release()
	if err := a.listenTLSEmbedded(f); err != nil {
		return err
	}
	a.patient = true // a ZooKeeper starting beside the daemon is waited for
	q, err := a.initQueue(ctx)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	queueID, err := q.Identity(ctx) // the event stream records whose events it holds
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	// Everything that can fail is done before the embedded NATS server
	// joins the other daemons': one that joined and then exited would stay
	// a JetStream peer the cluster counts on (decision 257).
	workers := map[queue.State]int{}
	for _, s := range reactor.JobStates {
		workers[s] = f.workers
	}
	if err := perState(f.stateWorkers, workers); err != nil {
		return usagef("--state-workers: %v", err)
	}
	attempts := map[queue.State]int{}
	if err := perState(f.stateTries, attempts); err != nil {
		return usagef("--state-attempts: %v", err)
	}
	rcfg := reactor.Config{Queue: q, Session: a.session, Host: f.host, Version: versionText(), Roles: roles, Workers: workers,
		BatchWorkers: f.batchWorkers, Window: f.window, Attempts: f.attempts, StateAttempts: attempts, Backoff: f.backoff,
		Rescan: f.rescan, RecordForeign: f.foreign, Grace: f.grace, Logger: a.log}
	if err := rcfg.Check(); err != nil {
		return usagef("%v", err)
	}
	routes, err := a.natsRoutes(q, f)
	if err != nil {
		return err
	}
	listen := f.natsListen
	if listen == "off" {
		listen = ""
	}
	web, advertise, err := a.startHTTP(f, apiCert)
	if err != nil {
		return err
	}
	apiRoute, dashRoute := lateRoutes(web)
	bus := events.New(events.Config{URL: a.natsJoined(), DataDir: dataDir, Listen: listen, Host: f.host,
		CredsFile: a.natsAuth.CredsFile, Token: a.natsAuth.Token, TLSCA: a.natsAuth.TLSCA, TLSCert: a.natsAuth.TLSCert, TLSKey: a.natsAuth.TLSKey,
		Cluster: f.natsCluster, ClusterSecret: secret, SecretSetting: "--nats-cluster-secret-file (" + EnvNATSSecret + ")",
		ClusterTLS: clusterTLS, ClusterCA: clusterCA, RootCA: natsCA, TLSSetting: "--nats-cluster-tls-cert, -key, -ca (" + EnvClusterCert + ", _KEY, _CA)", ListenTLS: listenTLS,
		ClusterName: natsClusterName(a.root), MaxAge: f.maxAge, Logger: a.log,
		Queue: queueID, QueueAt: a.queueAt(), ClientTokens: natsClientTokens(tokens)})
	busMade.Store(bus)
	defer bus.Close()
	if web != nil {
		defer web.Close() // before the bus's: requests end before it goes
	}
	var p pipeline = reactor.PassThrough{Delay: f.delay}
	var inv inventory.Inventory
	// The API's audit of storage: none without storage (passthrough).
	var auditor *audit.Auditor
	var profiles *profile.Set // published once the bus runs: to a user, a published profile says the daemon is up
	svc := &ops.Service{Q: q, Publish: bus.Publish, Recorded: bus.Replay, RemovePackage: access.RemovePackage}
	opsSession := a.session
	if web != nil {
		// Operators' actions through the API and the dashboard run on a
		// session of their own, as the CLI's do (decision 226): a job lock
		// one of them takes is then never the reactor's session's, in which
		// a lock that no worker here claims is an orphan to release.
		s, oq, err := a.dialLogging(ctx, a.quietLog)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		defer s.Close()
		opsSession, svc.Q = s, oq
	}
	var acc reactor.AccessHandler
	var accWorkers map[string]int
	if f.pipeline != "passthrough" {
		ing, set, err := a.ingestPipeline(ctx, q, bus, dataDir, f.host, advertise, f.ingest)
		if err != nil {
			return err
		}
		defer ing.Close()
		p, inv, profiles, auditor = ing, ing.Inventory(), set, ing.Auditor()
		rcfg.Profiles = set.Names()
		if web != nil {
			web.Handle(handlers.HandoffPrefix, ing.Handoff())
		}
		if f.pipeline == "rehearse" {
			p = rehearsal{ing, reactor.PassThrough{Delay: f.delay}}
		}
		if acc, accWorkers, err = a.startAccess(ctx, q, ing, web, svc, dataDir, f.host, advertise, f.access); err != nil {
			return err
		}
	}
	rcfg.Bus, rcfg.Jobs, rcfg.Batches, rcfg.Reporter = bus, p.Handlers(), p, p
	rcfg.Access, rcfg.AccessWorkers, rcfg.Advertise = acc, accWorkers, advertise
	var busStarted func()
	rcfg.Observer, busStarted = a.monitor(web, tokens, metricsToken, q, bus, p, roles, stalledAfter, expiringFiles(certs, cas))
	r, err := reactor.New(rcfg)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	// The host name is claimed before the route is announced: a name a
	// live daemon holds, clustered or not, is refused before this daemon's
	// server joins the others' (decision 257).
	if err := r.Register(ctx); err != nil {
		return &exitError{code: 1, err: err}
	}
	if err := a.startBus(ctx, bus, routes, dataDir); err != nil {
		return err
	}
	busStarted()
	if profiles != nil {
		// After the bus: `submit --wait` that saw the profile finds the NATS
		// it follows the batch on.
		if err := profile.Publish(ctx, q, profiles); err != nil {
			return &exitError{code: 1, err: fmt.Errorf("publishing the profiles: %w", err)}
		}
	}
	if routes != nil {
		stop := routes.follow(a.session, bus)
		defer stop()
	}
	if web != nil {
		detect := stalledDetector(q, stalledAfter)
		ap, err := api.New(api.Config{Ops: svc, Bus: bus, Inventory: inv, Audit: auditor, Tokens: tokens, Stalled: detect, Logger: a.log})
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		defer ap.Close() // before the server's: its event streams end first
		apiRoute.set(ap)
		dash, err := dashboard.New(dashboard.Config{Ops: svc, Session: opsSession, Bus: bus, Inventory: inv, Tokens: tokens,
			Stalled: detect, Logger: a.log})
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		defer dash.Close() // before the server's: its live streams end first
		dashRoute.set(dash)
	}
	for _, e := range expiringFiles(certs, cas) { // once serving: a refusal at start is the one line said
		a.warnExpiring(e)
	}
	a.log.Info("ingestq: serving", "pipeline", f.pipeline, "states", f.states, "http", textValue(advertise, "off"), "zk", a.zk, "root", a.root,
		"nats", natsWhere(a.natsJoined(), bus), "nats_cluster", f.natsCluster, "data", dataDir)
	err = r.Run(ctx)
	_ = bus.Close() // before the stats: Close counts what it kept and what it could not keep
	st := bus.Stats()
	a.log.Info("ingestq: stopped", "events_published", st.Published, "events_lost", st.Lost, "events_kept", st.Kept,
		"events_superseded", st.Superseded)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	return nil
}

// settleNATS applies decision 243's rule: INGESTQ_NATS says where the CLI
// finds events. serve takes it as --nats (join that NATS, embed none) only
// when no setting of the embedded server is given, and it names another
// address than the one the embedded server would listen on; else it is
// the CLI's, and serve embeds its server.
func (a *app) settleNATS(f serveFlags) {
	if !a.natsFromEnv {
		return
	}
	why := ""
	switch {
	case f.embedGiven:
		why = "--nats-listen or --nats-cluster is given"
	case namesListener(a.nats, f.natsListen):
		why = "it names the embedded server's own address (--nats-listen " + f.natsListen + ")"
	default:
		return
	}
	a.log.Info("serve: "+EnvNATS+" is where the CLI finds events; this daemon embeds the NATS server", "why", why, EnvNATS, a.natsShown())
	a.nats, a.natsFromEnv = "", false
}

// namesListener tells whether every URL of the NATS URL list urls names
// the address listen (host:port; "localhost" as 127.0.0.1).
func namesListener(urls, listen string) bool {
	if listen == "" || listen == "off" {
		return false
	}
	norm := func(hostport string) string {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return hostport
		}
		if host == "localhost" {
			host = "127.0.0.1"
		}
		return net.JoinHostPort(host, port)
	}
	n := 0
	for _, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		if _, rest, ok := strings.Cut(u, "://"); ok {
			u = rest
		}
		if i := strings.LastIndex(u, "@"); i >= 0 { // user:password@
			u = u[i+1:]
		}
		u, _, _ = strings.Cut(u, "/")
		if norm(u) != norm(listen) {
			return false
		}
		n++
	}
	return n > 0
}

// loadTokens reads the API's bearer tokens (--api-tokens, and
// INGESTQ_ADMIN_TOKEN). A file that holds no token is refused: it leaves
// every read open, which is never what naming a file meant. A file that
// group or others may read (or write) is warned of (decision 244).
// INGESTQ_API_TOKEN is the CLI's own token, often a reader's, exported in
// the shell serve may be started from: serve never takes it as one of its
// tokens, and says so when it is set alone.
func (a *app) loadTokens(file string) (*api.Tokens, error) {
	if file != "" {
		own, err := api.LoadTokens(file, "")
		if err != nil {
			return nil, usagef("--api-tokens: %v", err)
		}
		if own.Len() == 0 {
			return nil, usagef("--api-tokens %s holds no token (only blank or # lines): the API's reads would be open to anyone; "+
				"write ROLE TOKEN [NAME] lines into it, or leave --api-tokens out", file)
		}
		a.warnOpenFile("--api-tokens: the token file", file)
	}
	env := a.getenv(EnvAdminToken)
	if env == "" && a.getenv(EnvAPIToken) != "" {
		a.log.Warn(EnvAPIToken + " is the token the CLI sends, not one of serve's: serve takes no token from it; " +
			"an admin token of serve's own is " + EnvAdminToken)
	}
	tokens, err := api.LoadTokens(file, env)
	if err != nil && env != "" {
		return nil, usagef("--api-tokens: %v (the environment's %s gives it again, as an admin token; give it once)", err, EnvAdminToken)
	}
	if err != nil {
		return nil, usagef("--api-tokens: %v", err)
	}
	return tokens, nil
}

// warnOpenFile warns that file, which holds secrets, is open to group or
// others (decision 244); what names it in the line.
func (a *app) warnOpenFile(what, file string) {
	if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
		a.log.Warn(what+" is open to group or others; chmod 600 it (or 400)", "file", file, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
}

// reloadOnHUP re-reads, at each SIGHUP, the token file into tokens, so
// that a token is added or revoked without a restart, every CA file
// (reloadCAs), and every served certificate and its key (reloadCerts); a
// token file that no longer reads (or holds no token) is logged, and the
// tokens in force are kept. With neither a token file nor a certificate
// nor a CA a SIGHUP is logged and changes nothing. reloaded runs after
// each reload of the tokens taken. Between SIGHUPs it warns of a
// certificate in force, a CA or a chain's, as it enters its last 14 days
// (warnExpiring), and daily after. It returns its stop.
func (a *app) reloadOnHUP(file string, tokens *api.Tokens, reloaded func(), certs []servedCert, cas []servedCA) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	expiry := expiringFiles(certs, cas)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-expiryWarningDue(expiry):
				for _, e := range expiry {
					a.warnExpiring(e)
				}
				continue
			case <-hup:
			}
			if file == "" && len(certs) == 0 && len(cas) == 0 {
				a.log.Info("SIGHUP: nothing reloaded: a SIGHUP re-reads only the API's token file and the TLS certificates and CAs, and none is given " +
					"(--api-tokens, " + EnvAPITokens + "; --tls-cert, --nats-listen-tls-cert, --nats-cluster-tls-cert and -ca, --nats-tls-ca with --nats)")
				continue
			}
			a.reloadCAs(cas) // first: a route's certificate is checked against its CA
			a.reloadCerts(certs)
			if file == "" {
				continue
			}
			fresh, err := a.loadTokens(file)
			if err != nil {
				a.log.Error("API tokens not reloaded (SIGHUP); the tokens in force are kept", "file", file, "err", err)
				continue
			}
			tokens.Replace(fresh)
			reloaded()
			a.log.Info("API tokens reloaded (SIGHUP)", "file", file, "tokens", fresh.Len())
		}
	}()
	return func() {
		signal.Stop(hup)
		close(quit)
		<-done
	}
}

// parseMetricsAuth reads --metrics-auth: whether /metrics asks a token.
// It asks one of the daemon's tokens, so a daemon without any cannot.
func parseMetricsAuth(setting string, tokens *api.Tokens) (bool, error) {
	switch setting {
	case "open":
		return false, nil
	case "token":
		if tokens.Len() == 0 {
			return false, usagef("--metrics-auth token: this daemon has no token for Prometheus to send; add a line \"read TOKEN prometheus\" "+
				"to --api-tokens FILE (or set %s)", EnvAdminToken)
		}
		return true, nil
	}
	return false, usagef("--metrics-auth %q: want open (anyone may read /metrics) or token (a bearer token of --api-tokens)", setting)
}

// natsClientTokens is how the embedded NATS server admits its clients:
// by the API's tokens, unscoped, each with its role (events.ClientToken);
// without any, every client, as before.
func natsClientTokens(tokens *api.Tokens) func(string) (events.ClientToken, bool) {
	if tokens.Len() == 0 {
		return nil
	}
	return func(token string) (events.ClientToken, bool) {
		c, ok := tokens.Lookup(token)
		return events.ClientToken{Name: c.Name, Role: c.Role.String(), Scoped: c.Scoped()}, ok
	}
}

// startHTTP starts the daemon's HTTP server on --http ("off": none), with
// TLS when given a certificate (apiTLS), and settles the URL other hosts
// reach it at.
func (a *app) startHTTP(f serveFlags, cert *tlsfiles.Pair) (*httpd.Server, string, error) {
	listen, advertise := f.http, f.advertise
	if listen == "off" {
		switch {
		case advertise != "":
			return nil, "", usagef("--advertise %s: the HTTP server is off (--http off)", advertise)
		case f.httpHosts != "":
			return nil, "", usagef("--http-hosts %s: the HTTP server is off (--http off)", f.httpHosts)
		case f.metricsAuth != "open":
			return nil, "", usagef("--metrics-auth %s: the HTTP server is off (--http off)", f.metricsAuth)
		}
		return nil, "", nil
	}
	if advertise != "" {
		var err error
		if advertise, err = httpd.CheckAdvertise(advertise); err != nil {
			return nil, "", usagef("--advertise %v", err)
		}
	}
	hosts, err := httpd.ParseHosts(f.httpHosts)
	if err != nil {
		return nil, "", usagef("--http-hosts %v", err)
	}
	if slices.Contains(hosts, "*") {
		a.log.Warn("--http-hosts *: the HTTP server answers every Host, so a web page on any name pointed at this host (DNS rebinding) " +
			"reads what needs no token: name the hosts instead")
	}
	var web *httpd.Server
	if cert != nil {
		web, err = httpd.StartTLS(listen, cert, a.log)
	} else {
		web, err = httpd.Start(listen, a.log)
	}
	if errors.Is(err, httpd.ErrListen) {
		err = fmt.Errorf("%w (--http HOST:PORT picks another address, or off for none)", err)
	}
	if err != nil {
		return nil, "", &exitError{code: 1, err: err}
	}
	advertise = cmp.Or(advertise, web.DefaultAdvertise())
	if u, err := url.Parse(advertise); err == nil {
		hosts = append(hosts, u.Hostname()) // the name the other hosts fetch hand-offs by
	}
	web.AnswerTo(hosts, "--http-hosts ("+EnvHTTPHosts+")")
	return web, advertise, nil
}

// parseStates reads --states: "all", or a list of role names.
func parseStates(list string) ([]reactor.Role, error) {
	if strings.TrimSpace(list) == "all" {
		return reactor.AllRoles(), nil
	}
	return reactor.ParseRoles(strings.Split(list, ","))
}

// natsRoutes, with --nats-cluster, announces this daemon's NATS route in
// ZooKeeper and returns what keeps its server routed to the other
// daemons', with their routes now (none: its server runs alone for now).
func (a *app) natsRoutes(q *queue.Queue, f serveFlags) (*natsRoutes, error) {
	if f.natsCluster == "" {
		return nil, nil
	}
	if a.nats != "" {
		return nil, usagef("--nats-cluster clusters the embedded NATS server, --nats %s replaces it: give one", a.natsShown())
	}
	url, err := events.RouteURL(f.natsCluster)
	if err != nil {
		return nil, usagef("--nats-cluster: %v", err)
	}
	// A name is listened on as this host resolves it: Debian maps the
	// machine's own name to 127.0.1.1, where no other host reaches it.
	host, _, _ := net.SplitHostPort(f.natsCluster)
	if only, ips := loopbackOnly(host); only && net.ParseIP(host) == nil {
		a.log.Warn("--nats-cluster names a host that resolves here to loopback only: the embedded NATS server listens there, "+
			"where the other hosts cannot reach it; give this host's IP address on the private network",
			"nats_cluster", f.natsCluster, "resolves_to", fmt.Sprint(ips))
	}
	return &natsRoutes{q: q, host: f.host, url: url, log: a.log}, nil
}

// startBus, with --nats-cluster, routes this daemon's server to the other
// daemons'; starts the bus; and then announces its route, once the server
// listens (the other daemons then route to it). The host node, registered
// before, refused a name a live daemon holds already (decision 257).
func (a *app) startBus(ctx context.Context, bus *events.Bus, routes *natsRoutes, dataDir string) error {
	if routes != nil {
		if err := routes.comeBack(ctx, dataDir); err != nil {
			return &exitError{code: 1, err: err}
		}
		peers, err := routes.others(ctx)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		bus.SetRoutes(peers)
	}
	err := bus.Start(ctx)
	if errors.Is(err, events.ErrListen) {
		err = fmt.Errorf("%w (--nats-listen or --nats-cluster HOST:PORT picks another address; --nats URL joins a running NATS instead)", err)
	}
	if err != nil && a.natsFromEnv {
		err = fmt.Errorf("%w (%s is set, to %s: serve joins that NATS rather than embed one; for an embedded server "+
			"give --nats-listen ADDR, or unset %s for serve)", err, EnvNATS, a.natsShown(), EnvNATS)
	}
	if err == nil && routes != nil {
		err = routes.announce(ctx)
	}
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	return nil
}

// perState copies "state=n" settings into m, checking the names.
func perState(in map[string]int, m map[queue.State]int) error {
	for name, n := range in {
		s, err := queue.ParseJobState(name)
		if err != nil {
			return err
		}
		m[s] = n
	}
	return nil
}

func natsWhere(url string, bus *events.Bus) string {
	if url != "" {
		return redact.Location(url)
	}
	if u := bus.ClientURL(); u != "" {
		return "embedded, " + u
	}
	return "embedded, in-process only"
}

// natsJoined is --nats as nats.go reads it (natsServers), "" without it:
// the bus's errors then show its token masked, as redact finds a user only
// after a scheme (serve --nats TOKEN@host:4222 logged the token).
func (a *app) natsJoined() string {
	if a.nats == "" {
		return ""
	}
	return strings.Join(a.natsServers(), ",")
}

// natsURL is where client commands find NATS: --nats, or the local
// daemon's embedded listener.
func (a *app) natsURL() string {
	if a.nats != "" {
		return a.nats
	}
	return "nats://127.0.0.1:4222"
}

// natsShown is natsURL as messages and logs show it: without a password
// or token, one before a host that names no scheme too (natsServers).
func (a *app) natsShown() string { return redact.Location(strings.Join(a.natsServers(), ",")) }
