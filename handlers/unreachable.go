package handlers

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/reactor"
)

// outOfReach marks err as an outage of what when it says the back end
// could not be reached or talked to at all: no connection, a connection
// cut, no answer in time, a PostgreSQL server starting up or shutting down
// or out of connections, a busy answer (503, 429: busy). A back end of the
// daemon's own, which every job without one of its profile's needs
// (shared), is reactor.UnavailableToAll, a profile's reactor.Unavailable.
// Any other error (a refusal, a conflict, a 500, 502 or 504 answer) stays
// the step's, with its attempts.
func outOfReach(what string, shared bool, err error) error {
	if !backEndDown(err) {
		return err
	}
	return outage(what, shared, err)
}

// outage marks err as an outage of what: of every job's back end (shared) or
// of a profile's.
func outage(what string, shared bool, err error) error {
	if shared {
		return reactor.UnavailableToAll(what, err)
	}
	return reactor.Unavailable(what, err)
}

// inventoryOut is outOfReach for the profile's inventory: the daemon's,
// which every job without one of its profile's needs, or the profile's own.
func (p *Pipeline) inventoryOut(prof *profile.Profile, err error) error {
	return outOfReach(inventoryName(prof), prof.Inventory == "", err)
}

// inventoryName names the profile's inventory in messages: the daemon's,
// or the profile's own.
func inventoryName(prof *profile.Profile) string {
	if prof.Inventory == "" {
		return "the inventory"
	}
	return "the inventory of profile " + prof.Name
}

// storageName names a storage target in messages.
func storageName(target string) string { return "storage target " + target }

// storageOut is outOfReach for a storage target: shared when it is one of
// the daemon's (--storage), not a profile's own. A local target with no
// room left is out too, as the working storage is (workFull): its jobs
// failed after their attempts, while an operator freed its disk.
func (p *Pipeline) storageOut(target string, err error) error {
	shared := slices.Contains(p.cfg.Storage, target)
	if full, inWork := p.noRoom(err); full && !inWork {
		return outage(storageName(target), shared, err)
	}
	return outOfReach(storageName(target), shared, err)
}

// noRoom tells whether err is a write that found no room (ENOSPC, or a
// quota's EDQUOT), and whether it wrote under the working storage.
func (p *Pipeline) noRoom(err error) (full, inWork bool) {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return false, false
	}
	var pe *fs.PathError
	return true, errors.As(err, &pe) && strings.HasPrefix(filepath.Clean(pe.Path), p.work+string(filepath.Separator))
}

// workFull marks h's error as an outage of the working storage when a
// write to it found no room (ENOSPC, or a quota's EDQUOT): another program
// filled the disk, and jobs finishing here free it. Every job of the state
// waits for it, its attempts unspent, as for any back end (decision 252):
// jobs failed after their attempts, in seconds.
func (p *Pipeline) workFull(h reactor.JobHandler) reactor.JobHandler {
	return reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
		res, err := h.Handle(ctx, s)
		if full, inWork := p.noRoom(err); full && inWork && !reactor.IsUnavailable(err) {
			return res, reactor.UnavailableToAll("the working storage "+p.work, err)
		}
		return res, err
	})
}

// busy tells whether err is a back end's answer that it takes no request
// now, whatever the request, and asks to be tried later: 503 or 429 from
// an S3 server (place.Busy) or from a storage or inventory service (its
// client's fetch.StatusError). Its Retry-After, if any, sets the job's
// least wait (reactor). A 500, 502 or 504 may be about the request, and
// stays the step's.
func busy(err error) bool {
	_, answered := fetch.BusyAnswer(err)
	return place.Busy(err) || answered
}

func backEndDown(err error) bool {
	var op *net.OpError
	var pg *pgconn.PgError
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &op):
		return op.Op != "remote error" // a TLS alert is the server's answer: it refuses this client
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), busy(err):
		return true
	case errors.As(err, &pg):
		// Class 57P: operator intervention (shutdown, starting up); 08:
		// connection exception; 53300: too many connections.
		return strings.HasPrefix(pg.Code, "57P") || strings.HasPrefix(pg.Code, "08") || pg.Code == "53300"
	case errors.Is(err, context.Canceled):
		return false // the step's end (shutdown, its job changed), not the back end's
	}
	return errors.As(err, &ne) && ne.Timeout() || pgconn.Timeout(err)
}
