package events

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedReadyTimeout bounds the wait for the embedded server to accept
// connections (measured: 4–28 ms).
const embeddedReadyTimeout = 10 * time.Second

// startEmbedded runs a JetStream-enabled nats-server in this process, its
// store under cfg.DataDir/nats. With cfg.Listen empty it opens no port and
// is reachable only in-process.
func startEmbedded(cfg Config) (*server.Server, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("events: embedded NATS server needs a data directory")
	}
	opts := &server.Options{
		ServerName: "ingestq-" + token(cfg.Host),
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.DataDir, "nats"),
		NoSigs:     true,
		Host:       "127.0.0.1",
		DontListen: cfg.Listen == "",
	}
	if cfg.Listen != "" {
		host, port, err := splitListen(cfg.Listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("events: embedded NATS server: %w", err)
	}
	// Debug flag on so the server's detail reaches slog, which filters by level.
	ns.SetLoggerV2(serverLogger{cfg.Logger.With("component", "nats-server")}, true, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(embeddedReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("events: embedded NATS server (listen %q) not ready after %s", cfg.Listen, embeddedReadyTimeout)
	}
	return ns, nil
}

// splitListen parses "host:port"; port 0 means a random free port.
func splitListen(listen string) (string, int, error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("events: listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("events: listen address %q: bad port", listen)
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
// errors, which are warnings (a full disk must not go unseen).
type serverLogger struct{ log *slog.Logger }

func (l serverLogger) logf(level slog.Level, format string, v []any) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

// Noticef logs at debug.
func (l serverLogger) Noticef(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }

// Warnf logs at debug.
func (l serverLogger) Warnf(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }

// Fatalf logs at warn; the embedded server never exits the process.
func (l serverLogger) Fatalf(format string, v ...any) { l.logf(slog.LevelWarn, format, v) }

// Errorf logs at warn.
func (l serverLogger) Errorf(format string, v ...any) { l.logf(slog.LevelWarn, format, v) }

// Debugf logs at debug.
func (l serverLogger) Debugf(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }

// Tracef logs at debug.
func (l serverLogger) Tracef(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
