package events

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/internal/tlsfiles"
)

// DefaultStream is the name of the JetStream stream that records events.
const DefaultStream = "INGESTQ_EVENTS"

// Defaults and bounds of the bus.
const (
	defaultMaxAge     = 7 * 24 * time.Hour
	defaultMaxBytes   = 1 << 30
	connectTimeout    = 5 * time.Second        // dial timeout for an external URL
	reconnectWait     = 250 * time.Millisecond // between reconnect attempts
	setupTimeout      = time.Minute            // stream create/update when ctx has no deadline
	setupTry          = 10 * time.Second       // one try of it
	closeFlushTimeout = 2 * time.Second        // Close waits this long for acks
	defaultAckTimeout = 15 * time.Second       // an unacknowledged publish is sent again after this (resend.go)
	lostWarnEvery     = 5 * time.Second        // at most one "lost" warning per interval
	queueSize         = 65536                  // events waiting for the publisher goroutine (a 60k-ref listing fits)
	queueWait         = 5 * time.Millisecond   // longest Publish waits for room in a full queue
)

// Config says where the bus runs and what the stream keeps. The zero value
// runs an embedded, in-process-only server (DataDir is then required).
type Config struct {
	URL       string        // existing NATS server/cluster (comma-separated URLs); "" = run an embedded server
	DataDir   string        // embedded server's JetStream store goes in DataDir/nats (required when embedded)
	Listen    string        // embedded listener host:port, e.g. "127.0.0.1:4222"; "127.0.0.1:0" = random port; "" = in-process only
	CredsFile string        // for URL: NATS credentials file (nats.UserCredentials)
	Token     string        // for URL: authentication token
	TLSCA     string        // for URL: CA certificate file (nats.RootCAs)
	RootCA    *tlsfiles.CA  // for URL, instead of TLSCA: the CA whose pool in force verifies the server at each connection and reconnection
	TLSCert   string        // for URL: client certificate file (nats.ClientCert, with TLSKey)
	TLSKey    string        // for URL: client key file
	Stream    string        // stream name, default DefaultStream
	MaxAge    time.Duration // stream limit, default 7 days
	MaxBytes  int64         // stream limit, default 1 GiB
	Host      string        // stamped on events, scopes signals; default os.Hostname()
	Logger    *slog.Logger  // default slog.Default()

	// Queue is the identity of the queue whose events the stream records
	// (queue.Queue.Identity), QueueAt where that queue is, for people
	// ("ZooKeeper servers, root"). A joined NATS whose stream records
	// another queue is refused; "" = not checked.
	Queue, QueueAt string

	// Cluster, for an embedded server, is where it listens for the routes
	// of the other daemons' servers (host:port); "" = never clustered.
	// Routes are those servers' route URLs at start (later: SetRoutes);
	// with none the server runs JetStream alone until SetRoutes names one.
	// ClusterName must be the same on every server of one cluster.
	Cluster     string
	Routes      []string
	ClusterName string // default "ingestq"
	// ClusterSecret, with Cluster, is the routes' shared secret: every
	// route into this server must present it, and every route it dials
	// presents it; "" = routes unauthenticated. SecretSetting names where
	// it is set, in the lines that say a route was refused.
	ClusterSecret, SecretSetting string
	// ClusterTLS, with Cluster, makes every route mutual TLS (LoadClusterTLS
	// reads it from files): this server presents its certificate on every
	// route, takes only routes whose certificate the CA signed, and checks
	// the servers it dials; nil = routes in clear. TLSSetting names where it
	// is set, in the lines that say a route failed its handshake.
	ClusterTLS *tls.Config
	TLSSetting string
	// ClusterCA, with ClusterTLS, is the CA file whose pool in force the
	// routes verify peers against, instead of ClusterTLS's: renewed by its
	// Reload, then ClusterCAReloaded; nil = ClusterTLS's pools.
	ClusterCA *tlsfiles.CA
	// ListenTLS, with Listen, has the client listener take TLS only
	// (LoadListenTLS reads it); nil = in clear.
	ListenTLS *tls.Config

	// ClientTokens, for an embedded server, finds who holds a token a
	// client presents on its listener (the daemon's API tokens): with it,
	// only a client presenting an unscoped one is admitted, with its
	// role's permissions (clientauth.go); nil = every client, as before.
	ClientTokens func(token string) (ClientToken, bool)
	clients      *tokenClients // ClientTokens' clients, shared by the servers the bus runs

	ackTimeout   time.Duration // tests shorten it; default defaultAckTimeout
	resendFor    time.Duration // tests shorten it; default defaultResendFor
	parkedProbe  time.Duration // tests shorten it; default parkedProbeEvery
	keptMax      int           // tests lower it; default keptMaxBytes
	settleWait   time.Duration // tests shorten it; default settleTimeout
	readyTimeout time.Duration // tests lengthen it; default embeddedReadyTimeout
	serverOpts   serverTweak   // tests change the embedded server's options
	// Tests: called where a race with Close was possible (kept.go, resend.go).
	keepTaking func() // Close has taken the flights, not yet the pauses
	pauseEnded func() // a resend's pause has ended, before it is taken
}

// withDefaults fills in the defaults of every unset field.
func (c Config) withDefaults() Config {
	c.Stream = cmp.Or(c.Stream, DefaultStream)
	c.ClusterName = cmp.Or(c.ClusterName, "ingestq")
	c.MaxAge = cmp.Or(c.MaxAge, defaultMaxAge)
	c.MaxBytes = cmp.Or(c.MaxBytes, defaultMaxBytes)
	// Named in the lines about refused routes when the caller names no setting.
	c.SecretSetting = cmp.Or(c.SecretSetting, "events.Config.ClusterSecret")
	c.TLSSetting = cmp.Or(c.TLSSetting, "events.Config.ClusterTLS")
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.ackTimeout = cmp.Or(c.ackTimeout, defaultAckTimeout)
	c.resendFor = cmp.Or(c.resendFor, defaultResendFor)
	c.parkedProbe = cmp.Or(c.parkedProbe, parkedProbeEvery)
	c.keptMax = cmp.Or(c.keptMax, keptMaxBytes)
	c.settleWait = cmp.Or(c.settleWait, settleTimeout)
	if c.ClientTokens != nil && c.URL == "" {
		c.clients = &tokenClients{lookup: c.ClientTokens, stream: c.Stream, log: c.Logger, pruneAt: pruneFirst}
	}
	return c
}

// Stats counts what the bus did with published events.
type Stats struct {
	Published uint64 // acknowledged by the stream (recorded)
	Lost      uint64 // not recorded: dropped, refused, past the parked events' cap, or not kept at Close; also failed signals
	Retried   uint64 // resends of events the stream did not acknowledge in time
	Kept      uint64 // unacknowledged at Close and kept for the next start (kept.go), parked ones among them
	Waiting   int    // events not yet acknowledged: queued, sent, waiting to be sent again, or parked
	Parked    int    // of Waiting, those held past resendFor until the stream takes events (parked.go)
	// Superseded counts progress events left out, while held or at Close,
	// for a later progress event of their job: never recorded, and not
	// lost, as the later one says all they did. Published + Kept + Lost +
	// Superseded (+ Waiting while running) is every event given.
	Superseded uint64

	// ResentAtElection counts events sent again at once when the stream
	// announced a new leader, unanswered until then (not in Retried).
	ResentAtElection uint64
}

// Bus publishes ingestq's events on NATS and records them in JetStream.
// Its methods are safe for concurrent use.
type Bus struct {
	cfg Config
	log *slog.Logger
	emb *embedded // nil when joined to an external URL
	nc  *nats.Conn
	js  jetstream.JetStream

	mu     sync.RWMutex // guards closed against enqueueing
	closed bool
	queue  chan outMsg
	stop   chan struct{} // closed by Close: the publisher drains and ends
	stopBy time.Time     // set before stop is closed: when draining gives up
	done   chan struct{} // closed when the publisher has ended
	reconf chan struct{} // the embedded server's routes changed (SetRoutes)
	// elected: the stream has a new leader; what it has not answered is sent again
	elected chan struct{}
	// unpark: the stream acknowledged a publish; parked events are sent again
	unpark chan struct{}
	// handingOver: Close waits for another member to lead the stream (stepdown.go)
	handingOver atomic.Pointer[chan string]

	swapping atomic.Bool // the embedded server is being replaced: its disconnect is ours
	// reloading: a ReloadOptions of the embedded server holds it; lookups (lastOn) share it
	reloading sync.RWMutex
	started   atomic.Bool // Start succeeded: the publisher runs

	ctx    context.Context // cancelled when Close begins; bounds background work and reconfiguring
	cancel context.CancelFunc
	bg     sync.WaitGroup // background work started by connection callbacks

	closing    atomic.Bool // Close has begun: the disconnect that follows is ours
	acks       sync.Map    // event ID → outMsg.acked of a PublishAcked on its way
	congested  atomic.Bool // a full queue did not drain in queueWait: drop at once until the publisher moves
	badCreds   atomic.Bool // NATS refused the credentials since the last connect: the resend warning says so
	published  atomic.Uint64
	lost       atomic.Uint64
	kept       atomic.Uint64 // kept at Close
	superseded atomic.Uint64 // progress events left out for a later one of their job (parked.go)
	retried    atomic.Uint64
	failing    sync.Map  // event ID → *resend: not acknowledged once, and not yet acknowledged nor lost
	pausing    sync.Map  // event ID → outMsg: waiting out the pause before it is sent again
	lostWarn   warnLimit // "events not recorded"
	resendWarn warnLimit // "sending them again"
	authWarn   warnLimit // "NATS refuses this daemon's credentials"

	flying           flights // events sent and not yet answered, until Close keeps them
	parked           parking // events past resendFor, held until the stream takes events or Close keeps them
	resentAtElection atomic.Uint64
	unsent           []outMsg // events the publisher did not send before Close's deadline (its goroutine's, then Close's)

	// The events kept at the last stop (kept.go), published first.
	keptTotal      int64 // read from the file, in New
	keptCount      atomic.Int64
	keptPublished  atomic.Int64
	keptSuperseded atomic.Int64 // progress events among them superseded by a later one of their job (parked.go)

	// The file while the bus runs (keptwriter.go): those events and the parked ones.
	keptFile       keptSet
	keptChanged    chan struct{} // keptFile changed: keptWriter writes the file anew
	keptWriterDone chan struct{} // closed when keptWriter has ended
	keptSay        atomic.Bool   // the last event kept at the last stop has gone: the next write says so
	keptWrites     atomic.Uint64 // writes of the file while running
	keptWritten    atomic.Uint64 // keptFile's version the last write was up to
	keptWarn       warnLimit     // "cannot write the events held"

	closeOnce sync.Once
	closeErr  error
}

// outMsg is one item for the publisher goroutine: an event for JetStream,
// or (flushed != nil) a marker Flush waits on. Signals do not queue
// (Signal).
type outMsg struct {
	subject string
	id      string // the event's ID, JetStream's Nats-Msg-Id: a copy published again within the stream's duplicate window is dropped
	data    []byte
	flushed chan struct{}
	acked   chan struct{} // closed once the stream has the event or it is counted lost; nil when nobody waits
	resent  bool          // sent again (resend.go): its waiter, if any, is in acks
	kept    bool          // kept at a stop and published by this start (kept.go): marked in the stream
}

var errClosed = errors.New("events: bus closed")
var errQueueFull = errors.New("events: publish queue full")

// Open is New and Start: a bus ready to publish.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	b := New(cfg)
	if err := b.Start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// New makes a bus that does nothing until Start: a daemon sets up what may
// still fail before its embedded server joins the cluster (a server that
// joined and went stays a peer the cluster waits for). Before Start only
// Publish, PublishAcked, Lost, SetRoutes, Stats and Close may be called;
// what is published waits in the queue.
func New(cfg Config) *Bus {
	cfg = cfg.withDefaults()
	b := &Bus{
		cfg:     cfg,
		log:     cfg.Logger,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		reconf:  make(chan struct{}, 1),
		elected: make(chan struct{}, 1),
		unpark:  make(chan struct{}, 1),

		keptChanged:    make(chan struct{}, 1),
		keptWriterDone: make(chan struct{}),
	}
	if cfg.URL == "" {
		b.emb = &embedded{}
		if cfg.Cluster != "" {
			b.emb.wanted = sortedRoutes(cfg.Routes)
		}
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	// The events kept at the last stop go first, before anything published now.
	kept := b.readKept()
	b.queue = make(chan outMsg, queueSize+len(kept))
	for _, m := range kept {
		b.queue <- m
	}
	return b
}

// Start starts the embedded server if Config.URL is empty (routed to the
// routes SetRoutes gave last, else Config.Routes), connects to NATS, and
// creates or updates the stream. The connection reconnects forever; each
// disconnect and reconnect is logged once. An external URL that cannot be
// reached within a few seconds is an error naming it. After an error the
// bus is closed.
func (b *Bus) Start(ctx context.Context) error {
	if err := b.open(ctx); err != nil {
		b.cancel()
		if b.nc != nil {
			b.closing.Store(true)
			b.nc.Close()
		}
		if b.emb != nil {
			b.emb.shutdown()
		}
		b.closeOnce.Do(func() { b.closeUnstarted() })
		return err
	}
	b.started.Store(true)
	go b.publisher()
	go b.keptWriter()
	if clustered, _ := b.clustered(); clustered {
		b.requestReconfigure() // the publisher settles the stream first
	}
	return nil
}

// clustered tells whether the bus runs an embedded cluster member.
func (b *Bus) clustered() (bool, int) {
	if b.emb == nil {
		return false, 1
	}
	return b.emb.clustered()
}

func (b *Bus) open(ctx context.Context) error {
	opts := []nats.Option{
		nats.Name("ingestq@" + b.cfg.Host),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.Timeout(connectTimeout),
		nats.RetryOnFailedConnect(false),
		nats.PingInterval(20 * time.Second),
		nats.DrainTimeout(closeFlushTimeout),
		nats.DisconnectErrHandler(b.onDisconnect),
		nats.ReconnectHandler(b.onReconnect),
		nats.ErrorHandler(b.onAsyncError),
	}
	var err error
	if b.cfg.URL == "" {
		if err := b.startEmbedded(); err != nil {
			return err
		}
		opts = append(opts, nats.InProcessServer(b.emb), asBus())
	} else {
		auth, err := b.cfg.AuthOptions()
		if err != nil {
			return err
		}
		// nats.go closes the connection for good when a server refuses the
		// same credentials twice; a daemon keeps trying, as in an outage:
		// a renewed creds file is read at each try.
		opts = append(opts, append(auth, nats.IgnoreAuthErrorAbort())...)
	}
	b.nc, err = nats.Connect(b.cfg.URL, opts...)
	if err != nil {
		if b.cfg.URL == "" {
			return fmt.Errorf("events: connect to embedded NATS server: %w", err)
		}
		switch {
		case AuthRefused(err):
			return fmt.Errorf("events: NATS at %s refused the credentials (authorization failed): %w", redact.Location(b.cfg.URL), err)
		case TLSFailed(err):
			return fmt.Errorf("events: the TLS handshake with NATS at %s failed: %w", redact.Location(b.cfg.URL), err)
		}
		return fmt.Errorf("events: connect to NATS at %s: %w", redact.Location(b.cfg.URL), err)
	}
	b.js, err = jetstream.New(b.nc,
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { b.answered(m) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { b.failed(m, err) }),
		jetstream.WithPublishAsyncTimeout(b.cfg.ackTimeout),
	)
	if err != nil {
		return fmt.Errorf("events: JetStream: %w", err)
	}
	// The stream's account hears its leader elections, wherever the leader is.
	elected := server.JSAdvisoryStreamLeaderElectedPre + "." + b.cfg.Stream
	if _, err := b.nc.Subscribe(elected, notDelivered(b.onLeaderElected)); err != nil {
		return fmt.Errorf("events: subscribe %s: %w", elected, err)
	}
	if err := b.guardConsumers(); err != nil {
		return err
	}
	if clustered, _ := b.clustered(); clustered {
		return nil // the cluster may still be electing: the publisher settles the stream
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, setupTimeout)
		defer cancel()
	}
	return b.settleStream(ctx)
}

// settleStream makes the stream, trying again while JetStream does not
// answer (an external cluster still electing its leaders, or slow under
// load), until ctx ends; a refusal is returned at once.
func (b *Bus) settleStream(ctx context.Context) error {
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, setupTry)
		err := b.ensureStream(tctx)
		cancel()
		var refused jetstream.JetStreamError
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrOtherQueue) || errors.As(err, &refused) && refused.APIError() != nil {
			return err
		}
		if denied := b.nc.LastError(); errors.Is(denied, nats.ErrPermissionViolation) {
			// No answer will come: another daemon's embedded server, say,
			// which lets no client manage its stream.
			return fmt.Errorf("events: NATS at %s does not let this daemon manage stream %s: %w; the daemons of a "+
				"queue share their embedded servers' stream with --nats-cluster, or join a NATS that lets them",
				redact.Location(b.cfg.URL), b.cfg.Stream, denied)
		}
		b.log.Warn("events: JetStream does not answer yet; trying again", "try", try, "err", err)
		if !backoff.Sleep(ctx, backoff.Delay(retryFirst, setupTry, try)) {
			return err
		}
	}
}

// startEmbedded runs the bus's own server: a cluster member if the routes
// wanted name others, else alone. A random client port is kept from then on, so
// that a server replaced later listens where clients were told.
func (b *Bus) startEmbedded() error {
	b.emb.mu.Lock()
	routes := b.emb.wanted
	b.emb.mu.Unlock()
	ns, err := startEmbedded(b.cfg, routes)
	if err != nil {
		return err
	}
	if b.cfg.Listen != "" {
		b.cfg.Listen = ns.Addr().String()
	}
	b.emb.mu.Lock()
	b.emb.ns, b.emb.routes, b.emb.wanted = ns, routes, routes
	b.emb.mu.Unlock()
	if b.cfg.Cluster != "" {
		b.logMembership(routes)
	}
	return nil
}

// AuthOptions turns the credentials of an external URL (CredsFile, Token,
// TLSCA, TLSCert, TLSKey) into NATS options; clients of the same server use
// them too.
func (c Config) AuthOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	switch {
	case c.RootCA != nil:
		opts = append(opts, rootCAsInForce(c.RootCA))
	case c.TLSCA != "":
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, fmt.Errorf("events: TLS client certificate and key go together (cert %q, key %q)", c.TLSCert, c.TLSKey)
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts, nil
}

// rootCAsInForce has a client verify the server against ca's pool in force
// at each connection and reconnection, as nats.RootCAs does with a file it
// reads each time (nats.go 1.55's RootCAsCB), but a file refused by ca's
// Reload leaves the pool in force rather than failing the reconnection.
func rootCAsInForce(ca *tlsfiles.CA) nats.Option {
	return func(o *nats.Options) error {
		if o.TLSConfig == nil {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.RootCAsCB = func() (*x509.CertPool, error) { return ca.Pool(), nil }
		o.Secure = true
		return nil
	}
}

// Stream metadata naming the queue whose events the stream records.
const (
	metaQueue   = "ingestq_queue"
	metaQueueAt = "ingestq_queue_at"
	// metaQueueFrom is the stream sequence of the queue's first event, in
	// decimal, when the stream recorded another queue's before it (a data
	// folder kept while the queue was made anew): a replay of this queue
	// starts there, whatever the events' times.
	metaQueueFrom = "ingestq_queue_from_seq"
)

// ErrOtherQueue is the refusal of a joined NATS whose stream records
// another queue's events.
var ErrOtherQueue = errors.New("it records the events of another queue")

// ensureStream creates the stream or brings its configuration up to date,
// never with fewer replicas than it has, and records which queue it is for.
// A new stream is created with its queue in the one call: JetStream refuses
// to create a stream that exists with another configuration, so of two
// queues' daemons creating it at once on an empty NATS one wins, and the
// other reads the winner's stream and judges it as one that existed.
func (b *Bus) ensureStream(ctx context.Context) error {
	s, err := b.js.Stream(ctx, b.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		meta := map[string]string{}
		_ = b.ownStream(false, 0, meta) // no queue named yet: nothing to refuse
		_, err = b.js.CreateStream(ctx, b.streamConfig(b.wantReplicas(), meta))
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && !creatingElsewhere(err):
			return fmt.Errorf("events: create stream %s: %w", b.cfg.Stream, err)
		}
		s, err = b.js.Stream(ctx, b.cfg.Stream) // created meanwhile, by another daemon
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			// Still being made: not an API error, so settleStream asks again.
			return fmt.Errorf("events: stream %s: another daemon is creating it", b.cfg.Stream)
		}
	}
	if err != nil {
		return fmt.Errorf("events: stream %s: %w", b.cfg.Stream, err)
	}
	have := s.CachedInfo().Config
	meta := map[string]string{}
	maps.Copy(meta, have.Metadata)
	if err := b.ownStream(true, s.CachedInfo().State.LastSeq, meta); err != nil {
		return err
	}
	if _, err := b.js.UpdateStream(ctx, b.streamConfig(max(b.wantReplicas(), have.Replicas), meta)); err != nil {
		return fmt.Errorf("events: update stream %s: %w", b.cfg.Stream, err)
	}
	return nil
}

// creatingElsewhere tells a create that failed because another daemon
// creates the stream at the same instant on the same server: its store is
// being made (JetStream's generic stream creation error, 10049), seen once
// in 30 rounds of two daemons opening at once.
func creatingElsewhere(err error) bool {
	var js jetstream.JetStreamError
	return errors.As(err, &js) && js.APIError() != nil && js.APIError().ErrorCode == 10049
}

// streamConfig is the stream's configuration, meta its metadata.
func (b *Bus) streamConfig(replicas int, meta map[string]string) jetstream.StreamConfig {
	description := "ingestq events"
	if at := meta[metaQueueAt]; at != "" {
		description += " of the queue at " + at // what `nats stream info` shows
	}
	return jetstream.StreamConfig{
		Name:        b.cfg.Stream,
		Description: description,
		Metadata:    meta,
		Subjects:    []string{SubjectAll},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      b.cfg.MaxAge,
		MaxBytes:    b.cfg.MaxBytes,
		Replicas:    replicas,
		AllowDirect: true, // Recorded's lookups are answered by any replica
	}
}

// ownStream sets meta, the stream's metadata, to this bus's queue. A stream
// of no queue (made before streams named theirs) is adopted. One of another
// queue in the embedded server's store is this queue's data folder reused
// (decision 370): this queue's events start after last, the stream's last
// sequence, which replays of this queue start after; on a joined NATS it is
// a live queue's, whose events and signals would mix with this one's.
func (b *Bus) ownStream(existed bool, last uint64, meta map[string]string) error {
	if b.cfg.Queue == "" {
		return nil
	}
	other, otherAt := meta[metaQueue], meta[metaQueueAt]
	switch {
	case other == b.cfg.Queue:
	case other != "" && b.emb == nil:
		return fmt.Errorf("events: stream %s on NATS at %s: %w (%s; its /batches made in %s), not this daemon's (%s): "+
			"their events would mix under the same ids and their daemons' wake-up signals cross; give each queue a NATS account "+
			"of its own (or a NATS of its own), or, if that queue is gone for good, remove the stream (nats stream rm %s)",
			b.cfg.Stream, redact.Location(b.cfg.URL), ErrOtherQueue, otherAt, other, b.cfg.QueueAt, b.cfg.Stream)
	case other != "":
		// The queues' places may read the same (a ZooKeeper wiped, the
		// same root): their identities, the making of /batches, differ.
		b.log.Info("events: the data folder's stream recorded another queue's events; it records this queue's from now on "+
			"(replays leave the older events out)", "stream", b.cfg.Stream, "was", otherAt+", its /batches made in "+other,
			"now", b.cfg.QueueAt+", its /batches made in "+b.cfg.Queue, "from_seq", last+1)
		meta[metaQueueFrom] = strconv.FormatUint(last+1, 10)
	case existed:
		b.log.Info("events: the stream named no queue; it records this queue's events from now on", "stream", b.cfg.Stream, "queue", b.cfg.QueueAt)
	}
	meta[metaQueue], meta[metaQueueAt] = b.cfg.Queue, b.cfg.QueueAt
	return nil
}

// Subscribe calls fn for each event published on subject (a NATS subject
// filter such as "ingestq.job.completed.*"), on core NATS. Messages that
// are not events are logged at debug and skipped. fn runs on one goroutine
// per subscription, in order.
func (b *Bus) Subscribe(subject string, fn func(Event)) (unsubscribe func(), err error) {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) {
		e, err := decode(m.Data)
		if err != nil {
			b.log.Debug("events: skipping a message that is not an event", "subject", m.Subject, "err", err)
			return
		}
		fn(e)
	})
	if err != nil {
		return nil, fmt.Errorf("events: subscribe %s: %w", subject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// SubscribeSignal calls fn with the data of each signal this bus sends with
// Signal(subject, ...); subject may use NATS wildcards.
func (b *Bus) SubscribeSignal(subject string, fn func(data []byte)) (unsubscribe func(), err error) {
	sub, err := b.nc.Subscribe(SignalSubject(b.cfg.Host, subject), notDelivered(func(m *nats.Msg) { fn(m.Data) }))
	if err != nil {
		return nil, fmt.Errorf("events: subscribe signal %s: %w", subject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Conn returns the bus's NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// Replay is the package's Replay of the bus's stream.
func (b *Bus) Replay(ctx context.Context, f Filter, fn func(Event) error) error {
	return Replay(ctx, b.nc, b.cfg.Stream, f, fn)
}

// Connected tells whether the bus has its NATS connection now.
func (b *Bus) Connected() bool { return b != nil && b.nc != nil && b.nc.IsConnected() }

// ClientURL returns the URL other processes connect to: the embedded
// server's when it listens, else Config.URL ("" for an in-process-only
// embedded server).
func (b *Bus) ClientURL() string {
	if b.emb != nil {
		if b.cfg.Listen == "" {
			return ""
		}
		return "nats://" + b.cfg.Listen
	}
	return b.cfg.URL
}

// Stats returns the counters so far.
func (b *Bus) Stats() Stats {
	parked := b.parked.len()
	return Stats{Published: b.published.Load(), Lost: b.lost.Load(), Retried: b.retried.Load(), Kept: b.kept.Load(),
		Superseded: b.superseded.Load(), ResentAtElection: b.resentAtElection.Load(), Parked: parked,
		Waiting: len(b.queue) + count(&b.pausing) + b.flying.len() + parked}
}

// Flush waits until every event published so far has been acknowledged or
// counted lost (an event waiting to be sent again is neither yet), or
// parked (held until the stream takes events, which may be hours), and
// every signal has reached the server. For tests and shutdown; an error
// means ctx ended first or the server cannot be reached. Without a
// deadline on ctx, Flush gives up after 30 s.
func (b *Bus) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	for {
		if err := b.flushSent(ctx); err != nil {
			return err
		}
		n := count(&b.failing)
		if n == 0 {
			break
		}
		if !backoff.Sleep(ctx, resendFirst) {
			return fmt.Errorf("events: flush: %d events waiting to be sent again: %w", n, ctx.Err())
		}
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("events: flush: %w", err)
	}
	return nil
}

// flushSent waits until the publisher has sent what was queued before it
// and JetStream has answered every publish.
func (b *Bus) flushSent(ctx context.Context) error {
	// No lock here: a Flush blocked on a full queue must not hold up Close
	// (nor, through Close, Publish). After Close, b.done stands for the marker.
	flushed := make(chan struct{})
	select {
	case b.queue <- outMsg{flushed: flushed}:
	case <-b.done:
	case <-ctx.Done():
		return fmt.Errorf("events: flush: %w", ctx.Err())
	}
	select {
	case <-flushed:
	case <-b.done:
	case <-ctx.Done():
		return fmt.Errorf("events: flush: %w", ctx.Err())
	}
	select {
	case <-b.flying.done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("events: flush: %d publishes unacknowledged: %w", b.flying.len(), ctx.Err())
	}
}

// Close sends what is queued, waits up to 2 s for acknowledgements (sending
// again at once what a new stream leader has not answered), keeps what is
// still unacknowledged for the next start (kept.go), hands over what its
// embedded server leads, the stream or JetStream's meta group (up to 3 s
// more, stepdown.go), closes the connection and shuts the embedded server
// down. Later Publish calls count their events lost. Close is safe to call
// more than once.
func (b *Bus) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

func (b *Bus) close() error {
	if !b.started.Load() {
		b.closeUnstarted()
		return nil
	}
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	deadline := time.Now().Add(closeFlushTimeout)
	b.stopBy = deadline
	b.cancel() // a reconfiguration under way gives up
	close(b.stop)
	<-b.done           // after the acknowledgements, until the deadline
	<-b.keptWriterDone // ended when Close began: the file is Close's to write
	// What is still unacknowledged now is kept for the next start, once:
	// the connection is about to close, and answers coming later are
	// ignored. What cannot be kept is lost.
	b.keepAtClose()
	b.acks.Range(func(id, _ any) bool { b.acked(id.(string)); return true })
	if b.emb != nil {
		b.handOver() // while this server still runs, other members take over what it leads
	}

	b.closing.Store(true)
	b.bg.Wait()
	closed := make(chan struct{})
	b.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := b.nc.Drain(); err == nil {
		select {
		case <-closed:
		case <-time.After(closeFlushTimeout + time.Second):
		}
	}
	b.nc.Close()

	if b.emb != nil {
		b.emb.shutdown()
	}
	return nil
}

// closeUnstarted closes a bus that never started (or failed to): the
// events published to it, and those kept at the last stop, are kept for
// the next start.
func (b *Bus) closeUnstarted() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	close(b.done)
	for {
		select {
		case m := <-b.queue:
			if m.flushed != nil {
				close(m.flushed)
				continue
			}
			b.unsent = append(b.unsent, m) // its waiter is told as it is kept
		default:
			b.keepAtClose()
			return
		}
	}
}

// onDisconnect logs a lost connection once (at debug when Close caused it).
func (b *Bus) onDisconnect(_ *nats.Conn, err error) {
	if b.closing.Load() {
		b.log.Debug("events: NATS connection closed")
		return
	}
	if b.swapping.Load() {
		b.log.Debug("events: embedded NATS server replaced; reconnecting")
		return
	}
	b.log.Warn("events: NATS disconnected, reconnecting", "err", err)
}

// onReconnect logs the reconnect and makes sure the stream exists again
// (a server that lost its store would otherwise refuse every event).
func (b *Bus) onReconnect(nc *nats.Conn) {
	b.badCreds.Store(false)
	if !b.swapping.Load() {
		b.log.Info("events: NATS reconnected", "url", b.serverURL(nc))
	}
	if b.closing.Load() {
		return
	}
	if b.cfg.Cluster != "" {
		b.requestReconfigure() // the publisher settles the stream, in turn with its sends
		return
	}
	// Not once Close has begun: its bg.Wait must not run alongside a
	// bg.Go (a reconnect at shutdown raced it; the race detector saw it).
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return
	}
	b.bg.Go(func() {
		ctx, cancel := context.WithTimeout(b.ctx, setupTimeout)
		defer cancel()
		if err := b.ensureStream(ctx); err != nil && b.ctx.Err() == nil {
			b.log.Warn("events: after reconnect", "err", err)
		}
	})
}

// serverURL names the server the bus is connected to, for the logs. The
// embedded server is reached in-process: the client's own idea of its URL
// is the NATS default (nats://127.0.0.1:4222), where nothing of the bus's
// may listen, so it is named by where its clients reach it (--nats-listen),
// or as in-process only.
func (b *Bus) serverURL(nc *nats.Conn) string {
	if b.emb == nil {
		return redact.Location(nc.ConnectedUrl()) // nats.go's Redacted shows a token (nats://TOKEN@host)
	}
	if u := b.ClientURL(); u != "" {
		return u + " (embedded)"
	}
	return "embedded (in-process only)"
}

// onAsyncError logs errors NATS reports outside any call (slow consumer,
// permissions, credentials refused at a reconnect: at most one warning
// every few seconds, as the bus tries again four times a second).
func (b *Bus) onAsyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	if AuthRefused(err) {
		b.badCreds.Store(true)
		if b.authWarn.Allow() {
			b.log.Warn("events: NATS refuses this daemon's credentials (authorization failed); trying again, "+
				"reading the credentials file anew each time", "url", redact.Location(b.cfg.URL), "err", err)
		}
		return
	}
	if sub != nil {
		b.log.Warn("events: NATS subscription error", "subject", sub.Subject, "err", err)
		return
	}
	if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), server.JSAdvisoryStreamLeaderElectedPre) {
		b.log.Warn("events: NATS does not let this daemon hear the event stream's leader elections (no permission to "+
			"subscribe to them); events caught in a leader change are sent again after their 15 s ack timeout", "err", err)
		return
	}
	b.log.Warn("events: NATS error", "err", err)
}

// AuthRefused tells whether err is NATS refusing a client's credentials
// (authorization violation, or a user or account revoked or expired).
func AuthRefused(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// TLSFailed tells whether err is a TLS handshake with NATS that failed:
// the server's certificate not trusted, or the client's refused (which
// the server says in a TLS alert).
func TLSFailed(err error) bool {
	var verify *tls.CertificateVerificationError
	var remote *net.OpError
	return errors.Is(err, nats.ErrTLS) || errors.As(err, &verify) || errors.As(err, &remote) && remote.Op == "remote error"
}
