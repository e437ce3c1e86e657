package container

import (
	"errors"
	"fmt"
	"io"
)

// errCapReached stops io.Copy when a cappedWriter is full.
var errCapReached = errors.New("write cap reached")

// copyCapped copies src to dst, counting what is actually written (a header
// may lie about sizes). It stops with an error, having written no more than
// allowed, once the entry would pass the container's remaining budget or
// expand more than maxRatio times its compressed size.
func copyCapped(dst io.Writer, src io.Reader, budget int64, compressed uint64, maxRatio int64) (int64, error) {
	byBudget := uint64(max(budget, 0))
	byRatio := ratioCap(compressed, maxRatio)
	w := &cappedWriter{w: dst, left: int64(min(byBudget, byRatio))}
	n, err := io.Copy(w, src)
	switch {
	case !errors.Is(err, errCapReached):
		return n, err
	case byBudget <= byRatio:
		return n, fmt.Errorf("passes the container's limit of uncompressed bytes after %d bytes of this entry (zip bomb?)", n)
	default:
		return n, fmt.Errorf("expands past %d:1 of its %d compressed bytes (zip bomb?)", maxRatio, compressed)
	}
}

// cappedWriter writes at most left bytes, then fails with errCapReached.
type cappedWriter struct {
	w    io.Writer
	left int64
}

func (c *cappedWriter) Write(b []byte) (int, error) {
	capped := false
	if int64(len(b)) > c.left {
		b, capped = b[:c.left], true
	}
	n, err := c.w.Write(b)
	c.left -= int64(n)
	if err == nil && capped {
		err = errCapReached
	}
	return n, err
}
