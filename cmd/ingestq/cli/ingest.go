package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// pipeline is what serve plugs into the reactor: the ingest pipeline or the
// pass-through one.
type pipeline interface {
	reactor.BatchHandler
	reactor.Reporter
	Handlers() map[queue.State]reactor.JobHandler
}

// rehearsal is the ingest pipeline's payload reading and reports with
// pass-through job steps: a big batch tried without downloads or storage.
type rehearsal struct {
	*handlers.Pipeline
	steps reactor.PassThrough
}

func (r rehearsal) Handlers() map[queue.State]reactor.JobHandler { return r.steps.Handlers() }

// ingestFlags are the settings of the ingest pipeline.
type ingestFlags struct {
	profiles       string
	workDir        string
	workShared     bool
	storage        string
	inventory      string
	smtp           string
	smtpFrom       string
	smtpUser       string
	smtpPass       string
	maxFill        float64
	margin         string
	provisionWait  time.Duration
	perJob         int
	perHost        int
	fetchAttempts  int
	fetchTimeout   time.Duration
	fetchBusyLimit time.Duration
	fetchAllow     string
}

func (a *app) ingestFlagSet(fl *pflag.FlagSet, f *ingestFlags) {
	fl.StringVar(&f.profiles, "profiles", a.env(EnvProfiles, ""), "folder of profile files, one per collection (env "+EnvProfiles+"; default: the built-in demo profile)")
	fl.StringVar(&f.workDir, "work-dir", a.env(EnvWorkDir, ""), "the jobs' working folders (env "+EnvWorkDir+"; default: work in the data folder)")
	fl.BoolVar(&f.workShared, "work-shared", a.env(EnvWorkShared, "") == "true", "--work-dir is mounted at the same path on every host (NFS, ZFS over the network): any host takes any step of a job.\n"+
		"Without it, the steps after Downloading go to the host holding the job's files while it lives (env "+EnvWorkShared+")")
	fl.StringVar(&f.storage, "storage", a.env(EnvStorage, ""), "where objects are stored, for profiles that name no storage: comma-separated targets, the primary first\n"+
		"(a folder or file:// URL, or s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R[&secure=false for an endpoint without TLS]: an OCFL storage root; or an http(s) storage service;\n"+
		"env "+EnvStorage+"; default: an OCFL root in the data folder)")
	fl.StringVar(&f.inventory, "inventory", a.env(EnvInventory, ""), "the inventory of profiles that name none: postgres://USER@HOST/DB (shared by every host),\n"+
		"an http(s) inventory service, or a bbolt file (env "+EnvInventory+"; default: inventory.db in the data folder)")
	fl.StringVar(&f.smtp, "smtp", "", "SMTP server (host:port) for batch reports; none: reports are not e-mailed")
	fl.StringVar(&f.smtpFrom, "smtp-from", "ingestq@localhost", "sender of report e-mails")
	fl.StringVar(&f.smtpUser, "smtp-user", "", "SMTP user (PLAIN auth, over TLS or to localhost)")
	fl.StringVar(&f.smtpPass, "smtp-password", a.env(EnvSMTPPass, ""), "SMTP password (env "+EnvSMTPPass+")")
	fl.Float64Var(&f.maxFill, "max-fill", handlers.Defaults.MaxFill, "provisioning: the highest fill ratio of the working storage a job may bring it to (used/(used+available), as df counts it);\n"+
		"a job that would pass it waits in Provisioning, its message saying so (ingestq show BID). On a disk already fuller, raise it:\n"+
		"1 leaves only --space-margin to hold a job back")
	fl.StringVar(&f.margin, "space-margin", fmt.Sprintf("%dMiB", handlers.Defaults.Margin>>20), "provisioning: space kept free beyond a job's estimate")
	durationVar(fl, &f.provisionWait, "provision-wait", handlers.Defaults.ProvisionWait, "provisioning: how often a waiting job is tested again")
	fl.IntVar(&f.perJob, "downloads-per-job", handlers.Defaults.PerJob, "parallel downloads of one job")
	fl.IntVar(&f.perHost, "downloads-per-host", fetch.Defaults.PerHost, "parallel requests to one host, across all jobs")
	fl.IntVar(&f.fetchAttempts, "fetch-attempts", fetch.Defaults.Attempts, "tries of each HTTP request (downloads, callbacks; HTTP storage and inventory: at most 2)")
	fl.StringVar(&f.fetchAllow, "fetch-allow", a.env(EnvFetchAllow, ""), "ranges beside the public ones (loopback, private, other special-purpose) a depositor's URL (payload, manifest line) may reach, as CIDR,CIDR… (127.0.0.0/8 for\n"+
		"payloads served on this host); none by default: only public addresses. Link-local and cloud metadata addresses never (env "+EnvFetchAllow+")")
	durationVar(fl, &f.fetchTimeout, "fetch-timeout", fetch.Defaults.Timeout, "an HTTP request that moves no byte for this long (sending it, awaiting or reading its answer) fails, and is retried")
	durationVar(fl, &f.fetchBusyLimit, "fetch-busy-limit", handlers.Defaults.BusyLimit, "how long a job waits, spending no attempt, for a depositor's server that answers its downloads 503 or 429\n"+
		"(and its object manifest; a Pending batch: its payload URL), as its Retry-After asks, at most a minute at a time, before it fails")
}

// diskSpace reads a folder's file system: the daemon's Provisioning and
// /readyz, and the demo's check before it starts. Tests replace it to make
// the disk look full.
var diskSpace = handlers.DiskSpace

// ingestPipeline loads the profiles and opens the pipeline. The caller
// publishes the profiles to ZooKeeper (so that submit on any host can
// refuse an unknown one) once the daemon runs.
func (a *app) ingestPipeline(ctx context.Context, q *queue.Queue, bus *events.Bus, dataDir, host, advertise string, f ingestFlags) (*handlers.Pipeline, *profile.Set, error) {
	profiles, err := loadProfiles(f.profiles)
	if err != nil {
		return nil, nil, usagef("--profiles: %v", err)
	}
	margin, err := profile.ParseByteSize(f.margin)
	if err != nil {
		return nil, nil, usagef("--space-margin: %v", err)
	}
	allow, err := fetch.ParseAllow(f.fetchAllow)
	if err != nil {
		return nil, nil, usagef("--fetch-allow: %v", err)
	}
	var mailer *notify.Mailer
	if f.smtp != "" {
		mailer = &notify.Mailer{Addr: f.smtp, From: f.smtpFrom, Username: f.smtpUser, Password: f.smtpPass}
	}
	p, err := handlers.New(ctx, handlers.Config{Storage: handlers.ParseTargets(f.storage), Inventory: f.inventory,
		Agent: fmt.Sprintf("ingestq %s on %s", versionText(), host), Queue: q, Bus: bus, Profiles: profiles, DataDir: dataDir, Advertise: advertise,
		WorkDir: f.workDir, SharedWork: f.workShared, Host: host,
		Fetch:  fetch.Config{Attempts: f.fetchAttempts, Timeout: f.fetchTimeout, PerHost: f.perHost, Allow: allow},
		Mailer: mailer, PerJob: f.perJob, MaxFill: f.maxFill, Margin: int64(margin), ProvisionWait: f.provisionWait, BusyLimit: f.fetchBusyLimit,
		Space: diskSpace, Logger: a.log})
	if errors.Is(err, handlers.ErrConfig) {
		return nil, nil, usagef("%v", err)
	}
	if err != nil {
		return nil, nil, &exitError{code: 1, err: err}
	}
	a.log.Info("ingestq: profiles", "names", profiles.Names())
	a.warnLocalStorage(f.storage, f.inventory, profiles, dataDir)
	if n, err := p.Sweep(ctx); err != nil {
		a.log.Warn("ingestq: working area not swept", "err", err)
	} else if n > 0 {
		a.log.Info("ingestq: removed working folders no job needs", "folders", n)
	}
	return p, profiles, nil
}

// warnLocalStorage warns when a profile's objects go to this host's data
// folder (no --storage, and the profile names none) while its inventory
// (its own, or the daemon's) is shared by every host (PostgreSQL, a
// service): each host of the cluster would keep its own objects, recorded
// as if shared. A walk-through's env file lost INGESTQ_STORAGE that way
// (read by a shell, its URL's & ended the line) and nothing said so; a
// later version stored on another host is refused there as "storage
// restored older". One line per shared inventory.
func (a *app) warnLocalStorage(storage, inv string, profiles *profile.Set, dataDir string) {
	if storage != "" {
		return
	}
	local := map[string][]string{} // a shared inventory → the profiles storing here beside it
	for _, name := range profiles.Names() {
		p, _ := profiles.Get(name)
		if in := cmp.Or(p.Inventory, inv); p.Storage == "" && strings.Contains(in, "://") && !strings.HasPrefix(in, "file:") {
			local[in] = append(local[in], name)
		}
	}
	for _, in := range slices.Sorted(maps.Keys(local)) {
		a.log.Warn("ingestq: objects go to this host's data folder (no --storage, "+EnvStorage+"), while the inventory is shared: "+
			"every host of a cluster needs the same --storage, or each keeps its own objects",
			"storage", handlers.DefaultStorage(dataDir), "inventory", redact.URLs(in), "profiles", local[in])
	}
}

// loadProfiles reads a folder of profiles, or gives the built-in one.
func loadProfiles(dir string) (*profile.Set, error) {
	if dir == "" {
		return profile.NewSet(profile.Default())
	}
	return profile.LoadDir(dir)
}
