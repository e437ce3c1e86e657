// Package ctxio stops a local read when its context ends, as a request's
// body stops: a long copy from a file gives up at shutdown.
package ctxio

import (
	"context"
	"io"
)

// Reader reads r until ctx ends; from then on every Read returns ctx.Err().
func Reader(ctx context.Context, r io.Reader) io.Reader { return reader{ctx, r} }

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
