// Package metrics is the daemon's Prometheus metrics, served at /metrics:
// what the reactor tells it (steps, transitions, bytes), what the queue
// holds (jobs per state and profile, the oldest job's age and the stalled
// jobs per state, read from ZooKeeper when scraped), the back ends out, the
// event bus, the ZooKeeper session, NATS and the HTTP server's requests.
// Each daemon has its own registry, so that several daemons in one process
// (tests) keep their numbers apart.
package metrics

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
	"github.com/ingestq/ingestq/zkwatch"
)

// Config wires the metrics to what they read.
type Config struct {
	Queue   *queue.Queue
	Session *zkwatch.Session
	// Bus is a started bus; a daemon whose bus starts later (it waits for
	// its host name first, with its HTTP server up) gives it to WatchBus.
	Bus     *events.Bus
	Stalled stalled.Thresholds // what counts as stalled; default stalled.Defaults()
	// CertExpiry gives, by setting (its flag, like tls-cert or
	// nats-cluster-tls-ca), when the first certificate of its file in
	// force expires (of a chain, of a CA bundle): a reload changes it.
	CertExpiry map[string]func() time.Time
	Logger     *slog.Logger
}

// Metrics is one daemon's metrics. It is a reactor.Observer, and its
// Request method an httpd.RequestObserver.
type Metrics struct {
	reg      *prometheus.Registry
	log      *slog.Logger
	steps    *prometheus.HistogramVec
	moves    *prometheus.CounterVec
	bytes    map[reactor.Transfer]prometheus.Counter
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	backEnds *prometheus.GaugeVec
}

var (
	_ reactor.Observer        = (*Metrics)(nil)
	_ reactor.BackEndObserver = (*Metrics)(nil)
)

// New registers the metrics in a registry of their own.
func New(cfg Config) *Metrics {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Stalled == nil {
		cfg.Stalled = stalled.Defaults()
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: cfg.Logger}
	m.steps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ingestq_step_duration_seconds", Help: "How long each run of a job state's step took, by state and result (done, wait, retry, failed, cancelled, abandoned: the job changed under the step).",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 12), // 10 ms to about 12 h
	}, []string{"state", "result"})
	m.moves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ingestq_transitions_total", Help: "Transitions this daemon committed, by kind (job, batch, access), the state left and the outcome: the state entered, or abandoned, unknown, not_committed.",
	}, []string{"kind", "state", "outcome"})
	m.bytes = map[reactor.Transfer]prometheus.Counter{
		reactor.Downloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ingestq_downloaded_bytes_total", Help: "Bytes fetched from depositors' URLs."}),
		reactor.Stored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ingestq_stored_bytes_total", Help: "Bytes of new versions written to storage, once per copy."}),
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ingestq_http_requests_total", Help: "Requests to the daemon's HTTP server, by route pattern and status code.",
	}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ingestq_http_request_duration_seconds", Help: "How long the daemon's HTTP server took to answer, by route pattern.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	m.backEnds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ingestq_backend_out", Help: "1 while a back end this daemon's steps need (the inventory, a storage target, the working storage) is out: refusing, cutting or not answering connections; its jobs wait. 0 once a step here gets an answer from it, or no job this daemon saw waiting for it still waits.",
	}, []string{"backend"})
	m.reg.MustRegister(m.steps, m.moves, m.bytes[reactor.Downloaded], m.bytes[reactor.Stored], m.requests, m.latency, m.backEnds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newQueueView(cfg.Queue, cfg.Session, cfg.Stalled, cfg.Logger))
	m.links(cfg)
	return m
}

// links registers what is read from the session, the bus and the served
// certificates when scraped.
func (m *Metrics) links(cfg Config) {
	for setting, notAfter := range cfg.CertExpiry {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ingestq_tls_cert_expiry_timestamp_seconds",
			Help:        "When the first certificate to expire of a TLS setting's file in force expires (its NotAfter, Unix seconds), by setting: a certificate served with its chain (tls-cert, nats-listen-tls-cert, nats-cluster-tls-cert) or a CA file (nats-cluster-tls-ca, nats-tls-ca); a SIGHUP that reloads the file changes it.",
			ConstLabels: prometheus.Labels{"setting": setting}},
			func() float64 { return float64(notAfter().Unix()) }))
	}
	if cfg.Bus != nil {
		m.WatchBus(cfg.Bus)
	}
	if s := cfg.Session; s != nil {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ingestq_zookeeper_connected",
				Help: "1 while the daemon's ZooKeeper session is connected, else 0."},
				func() float64 { return one(s.State() == zk.StateHasSession) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ingestq_zookeeper_session_expirations_total",
				Help: "ZooKeeper sessions of this daemon that expired (its locks went with them)."},
				func() float64 { return float64(s.Expirations()) }))
	}
}

// WatchBus registers the bus's metrics, read when scraped: call it once the
// bus has started, as its connection is none before (a scrape then would
// read a nil connection and end the daemon).
func (m *Metrics) WatchBus(b *events.Bus) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ingestq_nats_connected",
			Help: "1 while the daemon's NATS connection is up, else 0."},
			func() float64 { return one(b.Conn().IsConnected()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ingestq_events_published_total",
			Help: "Events this daemon published."},
			func() float64 { return float64(b.Stats().Published) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ingestq_events_lost_total",
			Help: "Events not recorded: dropped, refused, unacknowledged after a minute of resends and past the 64 MiB the daemon holds, or at a stop and not kept, or of a commit whose outcome is unknown; also failed signals."},
			func() float64 { return float64(b.Stats().Lost) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ingestq_events_superseded_total",
			Help: "Job progress events never recorded because a later progress event of their job was: left out while held through a stream outage, or at a stop (not in ingestq_events_lost_total)."},
			func() float64 { return float64(b.Stats().Superseded) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ingestq_events_retried_total",
			Help: "Events sent again after the stream did not acknowledge them in time (a NATS cluster electing a stream leader)."},
			func() float64 { return float64(b.Stats().Retried) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ingestq_events_resent_at_election_total",
			Help: "Events sent again at once, unacknowledged when the stream announced a new leader (not in ingestq_events_retried_total)."},
			func() float64 { return float64(b.Stats().ResentAtElection) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ingestq_events_waiting",
			Help: "Events not yet acknowledged by the stream: queued, sent, waiting to be sent again, or held (ingestq_events_parked)."},
			func() float64 { return float64(b.Stats().Waiting) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ingestq_events_parked",
			Help: "Events unacknowledged after a minute of resends, held until the stream takes events again, in memory and in the data folder's events-kept.jsonl (sent at the next start, also after a kill); of a job's progress events, the latest only."},
			func() float64 { return float64(b.Stats().Parked) }))
}

// Handler serves the metrics in Prometheus's text format. A part that
// cannot be read (the queue while ZooKeeper is away) is left out and
// logged; the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, ErrorLog: slogPrintln{m.log}, Registry: m.reg})
}

// StepRan counts a step's run (reactor.Observer).
func (m *Metrics) StepRan(s queue.State, result reactor.StepResult, took time.Duration) {
	m.steps.WithLabelValues(s.Folder(), string(result)).Observe(took.Seconds())
}

// Moved counts a commit (reactor.Observer).
func (m *Metrics) Moved(kind string, from queue.State, outcome string) {
	m.moves.WithLabelValues(kind, from.Folder(), outcome).Inc()
}

// Transferred counts bytes (reactor.Observer).
func (m *Metrics) Transferred(what reactor.Transfer, n int64) {
	if c, ok := m.bytes[what]; ok {
		c.Add(float64(n))
	}
}

// BackEnd sets a back end's gauge (reactor.BackEndObserver).
func (m *Metrics) BackEnd(what string, out bool) {
	m.backEnds.WithLabelValues(what).Set(one(out))
}

// Request counts a request to the HTTP server (httpd.RequestObserver): by
// the pattern of its route, never the raw path, so that paths with ids
// make no new series.
func (m *Metrics) Request(pattern string, code int, took time.Duration) {
	route := pattern
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(took.Seconds())
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// slogPrintln adapts promhttp's error log to slog.
type slogPrintln struct{ l *slog.Logger }

func (p slogPrintln) Println(v ...any) {
	p.l.Warn("metrics: part of a scrape failed", "err", v)
}
