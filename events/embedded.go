package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedReadyTimeout bounds the wait for the embedded server to accept
// connections (measured: 4–28 ms); readyPoll is how often the wait looks
// whether the server gave up meanwhile.
const (
	embeddedReadyTimeout = 10 * time.Second
	readyPoll            = 50 * time.Millisecond
)

// ErrListen is the error of an embedded server whose listening address is
// taken (by another NATS server, or another daemon's).
var ErrListen = errors.New("cannot listen on")

// startEmbedded runs a JetStream-enabled nats-server in this process. With
// routes it is a member of the NATS cluster cfg.Cluster listens for, its
// store under cfg.DataDir/nats-cluster; without, it runs JetStream alone,
// its store under cfg.DataDir/nats. With cfg.Listen empty it opens no
// client port and is reachable only in-process.
func startEmbedded(cfg Config, routes []string) (*server.Server, error) {
	opts, err := serverOptions(cfg, routes)
	if err != nil {
		return nil, err
	}
	if err := canListen(opts.Host, opts.Port); err != nil {
		return nil, err
	}
	if opts.Cluster.Port != 0 {
		if err := canListen(opts.Cluster.Host, opts.Cluster.Port); err != nil {
			return nil, err
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		// An option nats-server refuses may be shown with the route URLs'
		// password.
		return nil, fmt.Errorf("events: embedded NATS server: %s", maskSecret(err.Error(), cfg.ClusterSecret))
	}
	if auth, ok := opts.CustomClientAuthentication.(*clientAuth); ok {
		auth.ns.Store(ns)
	}
	// Debug flag on so the server's detail reaches slog, which filters by level.
	fatal := make(chan string, 1)
	logger := serverLogger{log: cfg.Logger.With("component", "nats-server"), fatal: fatal,
		secret: cfg.ClusterSecret, setting: cfg.SecretSetting, tlsSetting: cfg.TLSSetting, said: &onceEach{}}
	if cfg.clients != nil {
		logger.holderOf = func(cid uint64) (ClientToken, bool) { return cfg.clients.holderOf(ns, cid) }
	}
	ns.SetLoggerV2(logger, true, false, false)
	go ns.Start()
	if err := waitReady(ns, fatal, cmp.Or(cfg.readyTimeout, embeddedReadyTimeout)); err != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("events: embedded NATS server (listen %q): %w", cfg.Listen, err)
	}
	return ns, nil
}

// serverOptions are the embedded server's settings: alone (no routes) or a
// cluster member routed to the given servers.
func serverOptions(cfg Config, routes []string) (*server.Options, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("events: embedded NATS server needs a data directory")
	}
	opts := &server.Options{
		ServerName: serverName(cfg.Host),
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.DataDir, "nats"),
		NoSigs:     true,
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		DontListen: cfg.Listen == "",
	}
	if cfg.Listen != "" {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
	}
	withListenTLS(opts, cfg)
	if len(routes) == 0 {
		withClientAuth(opts, cfg)
		return opts, nil
	}
	host, port, err := splitCluster(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	opts.StoreDir = ClusterStore(cfg.DataDir)
	opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: host, Port: port,
		// Clients are told of no other server: each host's client
		// listener may be a loopback address that means nothing elsewhere.
		NoAdvertise: true}
	if unspecified(host) {
		u, _ := RouteURL(cfg.Cluster) // checked by splitCluster
		opts.Cluster.Advertise = strings.TrimPrefix(u, "nats://")
	}
	opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
	// The system account's user, known only in this process, asks the
	// meta group to forget a server gone for good (ForgetHost); every
	// other client is the global account's (clientAuth).
	sys := server.NewAccount(server.DEFAULT_SYSTEM_ACCOUNT)
	opts.Accounts = []*server.Account{sys}
	opts.SystemAccount = sys.Name
	withClientAuth(opts, cfg)
	// A route to a daemon that died is retried every second until its
	// ZooKeeper node goes: one warning a minute, not one a second.
	opts.ReconnectErrorReports = 60
	withSecret(opts, cfg)
	withTLS(opts, cfg)
	if cfg.serverOpts != nil {
		cfg.serverOpts(opts)
	}
	return opts, nil
}

// serverTweak changes a cluster member's server options (tests only).
type serverTweak func(*server.Options)

// ClusterStore is where a cluster member's JetStream store is, under a
// daemon's data dir (one running alone keeps its own in dataDir/nats).
func ClusterStore(dataDir string) string { return filepath.Join(dataDir, "nats-cluster") }

// serverName is the embedded server's name, unique in a cluster as the
// daemon's host name is among live daemons (JetStream's peers are told
// apart by it, and a route between two servers of one name is refused).
func serverName(host string) string { return "ingestq-" + token(host) }

// RouteURL is the URL other daemons' servers route to for a cluster
// listener on listen (host:port, port not 0): nats://host:port, with this
// machine's host name for an unspecified host (0.0.0.0, ::, or none).
func RouteURL(listen string) (string, error) {
	host, port, err := splitCluster(listen)
	if err != nil {
		return "", err
	}
	if unspecified(host) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("events: cluster address %q: no host name to announce: %w", listen, err)
		}
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// splitCluster parses a cluster listen address; its port is needed, since
// other daemons must know it before this server listens.
func splitCluster(listen string) (string, int, error) {
	host, port, err := splitAddr(listen, "cluster address")
	if err == nil && port == 0 {
		err = fmt.Errorf("events: cluster address %q: want a port from 1 to 65535", listen)
	}
	return host, port, err
}

// splitAddr parses "host:port", what naming it in an error.
func splitAddr(addr, what string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("events: %s %q: %w", what, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("events: %s %q: bad port", what, addr)
	}
	return host, port, nil
}

func unspecified(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// canListen tells, by listening a moment, whether host:port is free, so
// that a taken port is named at once (nats-server only logs it).
func canListen(host string, port int) error {
	if port == server.RANDOM_PORT {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err // "bind: address already in use", without the address again
		}
		return fmt.Errorf("events: embedded NATS server %w %s: %v", ErrListen, addr, err)
	}
	return l.Close()
}

// waitReady waits until the server accepts connections, it gives up (an
// error it logged as fatal, such as a JetStream store it cannot write), or
// timeout passes.
func waitReady(ns *server.Server, fatal <-chan string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !ns.ReadyForConnections(readyPoll) {
		select {
		case msg := <-fatal:
			return errors.New(msg)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
	}
	return nil
}

// splitListen parses "host:port"; port 0 means a random free port.
func splitListen(listen string) (string, int, error) {
	host, port, err := splitAddr(listen, "listen address")
	if err != nil {
		return "", 0, err
	}
	if port == 0 {
		port = server.RANDOM_PORT // for nats-server, 0 would mean 4222
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, port, nil
}

// serverLogger routes nats-server's log to slog: everything at debug, except
// errors, which are warnings (a full disk must not go unseen). A fatal error
// is also handed to fatal, if there is room, for startEmbedded to return.
// A route refused for its cluster secret is said once (refusedLine,
// routeAuth), as is one whose TLS handshake failed (tlsRefusedLine), and
// the secret is masked in every line. A line about a token's client names
// the token's holder (token=NAME): nats-server knows the client by its ID
// only (clientAuth registers no user name).
type serverLogger struct {
	log   *slog.Logger
	fatal chan<- string
	// secret is the cluster secret ("": none), setting where it is set,
	// tlsSetting where the routes' TLS is; said holds the servers that
	// refused this one's route, and the hosts whose TLS handshake failed.
	secret, setting, tlsSetting string
	said                        *onceEach
	// holderOf is who holds the token a client presented, by its client
	// ID (nil: no client tokens).
	holderOf func(cid uint64) (ClientToken, bool)
}

func (l serverLogger) logf(level slog.Level, format string, v []any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	line := maskSecret(fmt.Sprintf(format, v...), l.secret)
	if name, ok := l.tokenHolder(line); ok {
		l.log.Log(context.Background(), level, line, "token", name)
		return
	}
	l.log.Log(context.Background(), level, line)
}

// Noticef logs at debug.
func (l serverLogger) Noticef(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }

// Warnf logs at debug.
func (l serverLogger) Warnf(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }

// Fatalf logs at warn; the embedded server never exits the process.
func (l serverLogger) Fatalf(format string, v ...any) {
	l.logf(slog.LevelWarn, format, v)
	select {
	case l.fatal <- maskSecret(fmt.Sprintf(format, v...), l.secret):
	default:
	}
}

// Errorf logs at warn; a route refused for its secret or its TLS, and a
// token's client refused an inbox, are said once, in words of ingestq's,
// and each time again at debug.
func (l serverLogger) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if msg, attrs := l.refusedLine(line); msg != "" {
		l.log.Warn(msg, attrs...)
		return
	}
	msg, attrs, tlsLine := l.tlsRefusedLine(line)
	if msg != "" {
		l.log.Warn(msg, attrs...)
		return
	}
	msg, attrs, inboxLine := l.inboxRefusedLine(line)
	if msg != "" {
		l.log.Warn(msg, attrs...)
		return
	}
	level := slog.LevelWarn
	if routeAuthLine(line) || tlsLine || inboxLine {
		level = slog.LevelDebug
	}
	l.logf(level, "%s", []any{line})
}

// Debugf logs at debug.
func (l serverLogger) Debugf(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }

// Tracef logs at debug.
func (l serverLogger) Tracef(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
