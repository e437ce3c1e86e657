package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/handlers/container"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Config wires a Pipeline.
type Config struct {
	Queue    *queue.Queue
	Bus      *events.Bus // progress events; nil for none
	Profiles *profile.Set
	DataDir  string // work/, ocfl/ and inventory.db live here
	// WorkDir holds the jobs' working folders; default DataDir/work.
	// SharedWork says it is mounted at the same path on every host of the
	// cluster, so any host takes any step of a job; otherwise the steps
	// after Downloading go to the host that holds the job's files (Host).
	WorkDir    string
	SharedWork bool
	Host       string // this daemon's name in /ingestq/hosts (reactor.Config.Host); default the host name
	// Storage is where the objects of a profile that names no storage go:
	// storage target URLs, the first the primary (see ParseTargets);
	// default DefaultStorage(DataDir).
	Storage []string
	// Agent names ingestq in PREMIS events ("ingestq v1.2 on host1");
	// default "ingestq".
	Agent string
	// Inventory is the inventory of a profile that names none: a
	// postgres:// URL, an http(s) service, or a bbolt file; default
	// DataDir/inventory.db.
	Inventory string
	// Advertise is the URL other hosts reach Handoff at (no trailing
	// slash): the job's store and inventory manifest URLs are made from
	// it. "" (no HTTP server) gives file: URLs, readable on this host only.
	Advertise string

	Fetch  fetch.Config   // the HTTP client of downloads (Allow: where a depositor's URL may reach), callbacks and HTTP endpoints
	Mailer *notify.Mailer // nil: reports are not e-mailed

	PerJob        int           // parallel downloads of one job; default 4
	MaxFill       float64       // the room rule (roomFor): the highest fill ratio of the working storage; default 0.8
	Margin        int64         // the room rule: bytes kept free beyond what a job needs; default 64 MiB
	ProvisionWait time.Duration // the room rule: re-test of a job waiting for room; default 30 s
	// BusyLimit is how long a job waits for a depositor's server that
	// answers its downloads or its object manifest 503 or 429 (a Pending
	// batch, its payload URL) before it fails; default 1 h.
	BusyLimit time.Duration
	// Space reports the free and total bytes of the file system of dir;
	// default DiskSpace (statfs). Tests replace it to make the disk look full.
	Space func(dir string) (free, total uint64, err error)

	Manifests  checkm.Limits
	Containers container.Limits
	Logger     *slog.Logger
}

// Pipeline is the ingest pipeline: a reactor.BatchHandler, a
// reactor.Reporter, and the job handlers of Handlers.
type Pipeline struct {
	cfg       Config
	q         *queue.Queue
	log       *slog.Logger
	http      *fetch.Client         // depositors' URLs: http(s) only
	local     *fetch.Client         // depositors' URLs: also file://, for profiles that allow local files
	operator  *fetch.Client         // the operator's own services, at any address: callbacks
	backEnd   *retryablehttp.Client // operator.BackEnd: the storage and inventory services'
	minter    *mint.Minter
	minting   sync.Mutex // one mintUnused walk at a time
	inventory inventory.Handle
	work      string

	mu      sync.Mutex
	stores  map[string]storage.Store    // storage targets by URL, opened once
	opening map[string]chan struct{}    // by URL: the turn to open it (openOnce), held outside mu
	invents map[string]inventory.Handle // profiles' own inventories by URL, opened once

	unreleased sync.Map     // "storage ARK", "inventory ARK": locks whose unlock found ZooKeeper away (underLock)
	waits      sync.Map     // jid (or a Pending batch's bid) → its waits in a row (waitsInRow): for another holder of its object (waitWhileObjectHeld), for a busy server (busyWait)
	trying     sync.Map     // jid → a download's try of it running here: its waits are kept meanwhile (tryAfterWaits)
	waitsSwept atomic.Int64 // when waits was last rid of the entries no one came back to (forgetLeftWaits), in Unix ns

	unpackMu  sync.Mutex
	unpacking uint64 // bytes the zips being unpacked here at once were found room for (roomToUnpack)

	// The working folders here whose job's status is watched, to remove
	// each once its job ends, whoever ends it (tend): jid → *tended.
	tending   sync.Map
	tendStart sync.Once     // tendLoop's start, at the first tend
	tendNow   chan struct{} // wakes tendLoop for a folder just tended
	tenders   sync.WaitGroup
	closing   context.Context // ends at Close, and with it the watches
	stop      context.CancelFunc
}

// ErrConfig marks a Config that New refuses (errors.Is).
var ErrConfig = errors.New("handlers: bad setting")

// Defaults are the settings a zero Config field gets; the CLI's flags show
// them as theirs.
var Defaults = Config{PerJob: 4, MaxFill: 0.8, Margin: 64 << 20, ProvisionWait: 30 * time.Second, BusyLimit: time.Hour}

// New opens the storage targets and the inventory; the built-in ones live
// under cfg.DataDir.
func New(ctx context.Context, cfg Config) (*Pipeline, error) {
	if cfg.Queue == nil || cfg.Profiles == nil || cfg.DataDir == "" {
		return nil, errors.New("handlers: Queue, Profiles and DataDir are required")
	}

	if cfg.MaxFill < 0 || cfg.MaxFill > 1 || cfg.PerJob < 0 || cfg.Margin < 0 || cfg.ProvisionWait < 0 || cfg.BusyLimit < 0 {
		return nil, fmt.Errorf("%w: max fill %v (want a ratio in (0, 1]), downloads per job %d, margin %d, provision wait %v, busy limit %v",
			ErrConfig, cfg.MaxFill, cfg.PerJob, cfg.Margin, cfg.ProvisionWait, cfg.BusyLimit)
	}
	cfg.PerJob = cmp.Or(cfg.PerJob, Defaults.PerJob)
	cfg.MaxFill = cmp.Or(cfg.MaxFill, Defaults.MaxFill)
	cfg.Margin = cmp.Or(cfg.Margin, Defaults.Margin)
	cfg.ProvisionWait = cmp.Or(cfg.ProvisionWait, Defaults.ProvisionWait)
	cfg.BusyLimit = cmp.Or(cfg.BusyLimit, Defaults.BusyLimit)
	cfg.Agent = cmp.Or(cfg.Agent, "ingestq")
	if len(cfg.Storage) == 0 {
		cfg.Storage = []string{DefaultStorage(cfg.DataDir)}
	}
	if cfg.Space == nil {
		cfg.Space = DiskSpace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	cfg.WorkDir = cmp.Or(cfg.WorkDir, filepath.Join(cfg.DataDir, "work"))
	p := &Pipeline{cfg: cfg, q: cfg.Queue, log: cfg.Logger, work: filepath.Clean(cfg.WorkDir),
		minter: mint.New(cfg.Queue),
		stores: map[string]storage.Store{}, opening: map[string]chan struct{}{}, invents: map[string]inventory.Handle{}}
	p.closing, p.stop = context.WithCancel(context.Background())
	fc := cfg.Fetch
	fc.Logger = cmp.Or(fc.Logger, cfg.Logger)
	fc.AllowFile, fc.AnyAddress = false, false
	p.http = fetch.New(fc)
	fc.AllowFile = true
	p.local = fetch.New(fc)
	// The profiles' callbacks, storage and inventory are the operator's
	// settings, not a depositor's: they may be on the operator's network.
	fc.AllowFile, fc.AnyAddress = false, true
	p.operator = fetch.New(fc)
	p.backEnd = p.operator.BackEnd()
	if err := os.MkdirAll(p.work, 0o750); err != nil {
		return nil, fmt.Errorf("handlers: working folder: %w", err)
	}
	if err := p.importOldStore(ctx, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("handlers: %w", err)
	}
	for _, t := range cfg.Storage {
		if _, err := p.store(ctx, t); err != nil {
			return nil, fmt.Errorf("handlers: %w", err)
		}
	}
	var err error
	if p.inventory, err = inventory.Open(ctx, cfg.Inventory, filepath.Join(cfg.DataDir, "inventory.db"), p.backEnd); err != nil {
		return nil, fmt.Errorf("handlers: inventory: %w", err)
	}
	return p, nil
}

// Close ends the watches of the working folders and closes the
// inventories.
func (p *Pipeline) Close() error {
	p.stop()
	p.tenders.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := []error{p.inventory.Close()}
	for _, h := range p.invents {
		errs = append(errs, h.Close())
	}
	return errors.Join(errs...)
}

// Storage is the daemon's default storage targets, the primary first.
func (p *Pipeline) Storage() []string { return p.cfg.Storage }

// Primary is the daemon's default primary storage, opened by New.
func (p *Pipeline) Primary() storage.Store {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stores[p.cfg.Storage[0]]
}

// Inventory is the daemon's default inventory.
func (p *Pipeline) Inventory() inventory.Inventory { return p.inventory }

// Handlers returns the handler of every job state from Estimating to Notify.
func (p *Pipeline) Handlers() map[queue.State]reactor.JobHandler {
	hs := map[queue.State]reactor.JobHandler{
		queue.Estimating:   reactor.JobHandlerFunc(p.estimate),
		queue.Provisioning: reactor.JobHandlerFunc(p.provision),
		queue.Downloading:  reactor.JobHandlerFunc(p.download),
		queue.Processing:   reactor.JobHandlerFunc(p.process),
		queue.Storing:      reactor.JobHandlerFunc(p.storeObject),
		queue.Recording:    reactor.JobHandlerFunc(p.record),
		queue.Notify:       reactor.JobHandlerFunc(p.notify),
	}
	for _, s := range []queue.State{queue.Processing, queue.Storing, queue.Recording} {
		hs[s] = p.adopting(s, hs[s])
	}
	for s, h := range hs {
		hs[s] = p.namingJob(p.workFull(h))
	}
	return hs
}

// namingJob has h's HTTP requests log through a logger naming the job.
func (p *Pipeline) namingJob(h reactor.JobHandler) reactor.JobHandler {
	return reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
		return h.Handle(fetch.WithLogger(ctx, p.log.With("job", s.Job.ID)), s)
	})
}

// profile returns a profile by name; an unknown one is fatal.
func (p *Pipeline) profile(name string) (*profile.Profile, error) {
	prof, ok := p.cfg.Profiles.Get(name)
	if !ok {
		return nil, reactor.Fatal(fmt.Errorf("unknown profile %q (profiles here: %v)", name, p.cfg.Profiles.Names()))
	}
	return prof, nil
}

// jobProfile is the profile of job j. A configuration without one says
// what was seen: empty (mrt-zk reads an empty node as {} too), or naming
// no profile (it said `unknown profile ""`, of either).
func (p *Pipeline) jobProfile(j *queue.Job) (*profile.Profile, error) {
	switch at := "/jobs/" + j.ID + "/configuration"; {
	case reflect.ValueOf(j.Config).IsZero():
		return nil, reactor.Fatal(fmt.Errorf("the job's configuration is empty (%s: missing, empty or {})", at))
	case j.Profile() == "":
		return nil, reactor.Fatal(fmt.Errorf("the job's configuration names no profile (%s: no profile_name, nor Merritt's profile)", at))
	}
	return p.profile(j.Profile())
}

// client is the fetch client a profile may use.
func (p *Pipeline) client(prof *profile.Profile) *fetch.Client {
	if prof.AllowLocalFiles {
		return p.local
	}
	return p.http
}

// targets are the storage targets of a profile's objects: its own list,
// or the daemon's; the primary first.
func (p *Pipeline) targets(prof *profile.Profile) []string {
	if t := ParseTargets(prof.Storage); len(t) > 0 {
		return t
	}
	return p.cfg.Storage
}

// inventoryFor is the profile's inventory: its own, or the daemon's.
// One that cannot be opened now is an error the step retries.
func (p *Pipeline) inventoryFor(ctx context.Context, prof *profile.Profile) (inventory.Inventory, error) {
	if prof.Inventory == "" {
		return p.inventory, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.invents[prof.Inventory]; ok {
		return h, nil
	}
	h, err := inventory.Open(ctx, prof.Inventory, "", p.backEnd)
	if err != nil {
		return nil, fmt.Errorf("inventory of profile %s: %w", prof.Name, err)
	}
	p.invents[prof.Inventory] = h
	return h, nil
}
