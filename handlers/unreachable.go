package handlers

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ingestq/ingestq/reactor"
)

// outOfReach marks err as an outage of what (reactor.Unavailable) when it
// says the back end could not be reached or talked to at all: no
// connection, a connection cut, no answer in time, a PostgreSQL server
// starting up or shutting down. Any other error (a refusal, a conflict, a
// 5xx answer about this object) stays the step's, with its attempts.
func outOfReach(what string, err error) error {
	if backEndDown(err) {
		return reactor.Unavailable(what, err)
	}
	return err
}

func backEndDown(err error) bool {
	var op *net.OpError
	var pg *pgconn.PgError
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &op), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &pg):
		// Class 57P: operator intervention (shutdown, starting up); 08: connection exception.
		return strings.HasPrefix(pg.Code, "57P") || strings.HasPrefix(pg.Code, "08")
	}
	return errors.As(err, &ne) && ne.Timeout() || pgconn.Timeout(err)
}
