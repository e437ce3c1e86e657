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

	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor"
)

// outOfReach marks err as an outage of what when it says the back end
// could not be reached or talked to at all: no connection, a connection
// cut, no answer in time, a PostgreSQL server starting up or shutting down
// or out of connections. A back end of the daemon's own, which every job
// without one of its profile's needs (shared), is reactor.UnavailableToAll,
// a profile's reactor.Unavailable. Any other error (a refusal, a conflict,
// a 5xx answer about this object) stays the step's, with its attempts.
func outOfReach(what string, shared bool, err error) error {
	switch {
	case !backEndDown(err):
		return err
	case shared:
		return reactor.UnavailableToAll(what, err)
	}
	return reactor.Unavailable(what, err)
}

// inventoryOut is outOfReach for the profile's inventory: the daemon's,
// which every job without one of its profile's needs, or the profile's own.
func (p *Pipeline) inventoryOut(prof *profile.Profile, err error) error {
	if prof.Inventory == "" {
		return outOfReach("the inventory", true, err)
	}
	return outOfReach("the inventory of profile "+prof.Name, false, err)
}

// storageOut is outOfReach for a storage target: shared when it is one of
// the daemon's (--storage), not a profile's own.
func (p *Pipeline) storageOut(target string, err error) error {
	return outOfReach("storage target "+target, slices.Contains(p.cfg.Storage, target), err)
}

// workFull marks h's error as an outage of the working storage when a
// write to it found no room (ENOSPC, or a quota's EDQUOT): another program
// filled the disk, and jobs finishing here free it. Every job of the state
// waits for it, its attempts unspent, as for any back end (decision 252):
// jobs failed after their attempts, in seconds.
func (p *Pipeline) workFull(h reactor.JobHandler) reactor.JobHandler {
	return reactor.JobHandlerFunc(func(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
		res, err := h.Handle(ctx, s)
		var pe *fs.PathError
		if (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) && !reactor.IsUnavailable(err) &&
			errors.As(err, &pe) && strings.HasPrefix(filepath.Clean(pe.Path), p.work+string(filepath.Separator)) {
			return res, reactor.UnavailableToAll("the working storage "+p.work, err)
		}
		return res, err
	})
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
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
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
