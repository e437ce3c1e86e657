// Package ctxio copies bytes under a context: a long copy of a local file
// stops when its context ends, as a request would.
package ctxio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"
)

// Reader returns r reading only while ctx is live.
func Reader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// CopySHA256 copies src to dst while ctx is live and returns the bytes
// copied and their SHA-256 in lower-case hex.
func CopySHA256(ctx context.Context, dst io.Writer, src io.Reader) (int64, string, error) {
	h := sha256.New()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	n, err := io.CopyBuffer(io.MultiWriter(dst, h), Reader(ctx, src), *bp)
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// copyBufs are CopySHA256's buffers, larger than io.Copy's 32 KiB: fewer
// syscalls for big files, and no garbage per small one.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
