package cli

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/access"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/httpd"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Environment variables of the daemon's access queues.
const (
	EnvAccessDir = "INGESTQ_ACCESS_DIR"
	EnvAccessTo  = "INGESTQ_ACCESS_TO"
)

// accessServeFlags are serve's settings of the access queues.
type accessServeFlags struct {
	dir          string
	to           string
	expiry       time.Duration
	threshold    string
	smallWorkers int
	largeWorkers int
}

func (a *app) accessFlagSet(fl *pflag.FlagSet, f *accessServeFlags) {
	fl.StringVar(&f.dir, "access-dir", a.env(EnvAccessDir, ""), "where access packages are written, and served from at /access/<name> (env "+EnvAccessDir+"; default: access in the data folder)")
	fl.StringVar(&f.to, "access-to", a.env(EnvAccessTo, ""), "where access packages go, for profiles that name none: empty for --access-dir, or s3://BUCKET/PREFIX?endpoint=… (presigned URLs) (env "+EnvAccessTo+")")
	durationVar(fl, &f.expiry, "access-expiry", access.DefaultExpiry, "how long an access package stays before the sweep removes it and its request (at most 168h with S3)")
	fl.StringVar(&f.threshold, "access-threshold", a.env(EnvAccessThreshold, "1GiB"), "estimated size above which a request made through the API goes to the large access queue (env "+EnvAccessThreshold+")")
	fl.IntVar(&f.smallWorkers, "access-small-workers", reactor.DefaultAccessSmallWorkers, "workers of the small access queue (0: not worked by this daemon)")
	fl.IntVar(&f.largeWorkers, "access-large-workers", reactor.DefaultAccessLargeWorkers, "workers of the large access queue (0: not worked by this daemon)")
}

// startAccess makes the daemon's assembler of access requests, serves its
// folder on web (when there is one), and readies svc for the API's
// requests. It returns the reactor's settings of the access queues.
func (a *app) startAccess(ctx context.Context, q *queue.Queue, ing *handlers.Pipeline, web *httpd.Server, svc *ops.Service,
	dataDir, host, advertise string, f accessServeFlags) (reactor.AccessHandler, map[string]int, error) {
	threshold, err := profile.ParseByteSize(f.threshold)
	if err != nil {
		return nil, nil, usagef("--access-threshold %v", err)
	}
	if f.expiry <= 0 {
		return nil, nil, usagef("--access-expiry %v: want a positive duration", f.expiry)
	}
	if f.smallWorkers < 0 || f.largeWorkers < 0 {
		return nil, nil, usagef("--access-small-workers %d, --access-large-workers %d: want 0 or more", f.smallWorkers, f.largeWorkers)
	}
	svc.Inventory, svc.AccessThreshold = ing.Inventory(), int64(threshold)
	dir := f.dir
	if dir == "" {
		dir = filepath.Join(dataDir, "access")
	}
	as, err := access.New(ctx, access.Config{Queue: q, Source: ing.ReaderFor, Dir: dir, To: f.to, ProfileTo: ing.AccessTargets(),
		Advertise: advertise, Host: host, Expiry: f.expiry, Logger: a.log, Gone: func(ctx context.Context, ref string) error {
			if err := svc.AccessGone(ctx, ref, ops.AccessView{}, queue.ErrNotFound); errors.Is(err, ops.ErrGone) {
				return err // who deleted it and when, as the recorded events tell
			}
			return nil
		}})
	if err != nil {
		return nil, nil, &exitError{code: 1, err: err}
	}
	if web != nil {
		web.Handle("GET "+access.Prefix, as.Handler())
	}
	return as, map[string]int{queue.AccessSmall: f.smallWorkers, queue.AccessLarge: f.largeWorkers}, nil
}
