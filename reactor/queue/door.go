package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/zkconn"
)

// ErrNoAnswer means ZooKeeper did not answer a request in time: the client
// holds requests while it reconnects, for as long as the outage lasts. A
// change that got no answer may still be applied later, as one whose
// connection closed may have been.
var ErrNoAnswer = errors.New("no answer from ZooKeeper")

// DefaultRequestTimeout bounds one request to ZooKeeper (WithRequestTimeout).
const DefaultRequestTimeout = 5 * time.Second

// door is the queue's one way to ZooKeeper: every request runs under the
// caller's context and the request timeout. go-zookeeper's requests take no
// context, so a request given up on runs on in its goroutine until the
// client answers it (at the latest when the connection closes).
type door struct {
	conn    *zk.Conn
	timeout time.Duration
	sent    *Requests
	log     *slog.Logger // at debug level, each request: what the daemon asks of ZooKeeper
}

// Requests counts the requests a Queue has sent to ZooKeeper since New:
// reads (get, exists, list, sync) and writes (create, delete, multi: a multi()
// is one request whatever it holds).
type Requests struct {
	Reads, Writes atomic.Uint64
}

// Requests returns the counts of requests this queue has sent.
func (q *Queue) Requests() (reads, writes uint64) {
	return q.zk.sent.Reads.Load(), q.zk.sent.Writes.Load()
}

// stat is a request's answer: what Get and Exists return besides an error.
type stat struct {
	data   []byte
	st     *zk.Stat
	exists bool
}

// await runs call under ctx and the request timeout.
func await[T any](ctx context.Context, d door, verb, path string, call func() (T, error)) (T, error) {
	if d.log.Enabled(ctx, slog.LevelDebug) {
		d.log.LogAttrs(ctx, slog.LevelDebug, "zookeeper request", slog.String("op", verb), slog.String("path", path))
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, fmt.Errorf("zookeeper %s %s: %w", verb, path, err)
	}
	if err := fits(&zk.CheckVersionRequest{Path: path}); err != nil { // a path-only request: a read's size
		var zero T
		return zero, err
	}

	type answer struct {
		v   T
		err error
	}
	got := make(chan answer, 1)
	go func() {
		v, err := call()
		got <- answer{v, err}
	}()
	t := time.NewTimer(d.timeout)
	defer t.Stop()
	select {
	case a := <-got:
		return a.v, a.err
	case <-t.C:
		var zero T
		return zero, fmt.Errorf("zookeeper %s %s: %w within %v", verb, path, ErrNoAnswer, d.timeout)
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("zookeeper %s %s: %w", verb, path, ctx.Err())
	}
}

func (d door) get(ctx context.Context, p string) ([]byte, *zk.Stat, error) {
	d.sent.Reads.Add(1)
	s, err := await(ctx, d, "get", p, func() (stat, error) {
		data, st, err := d.conn.Get(p)
		return stat{data: data, st: st}, err
	})
	return s.data, s.st, err
}

// getMany reads the nodes at paths at once, under one wait: go-zookeeper
// pipelines the requests on its connection. Each read's error is its own;
// when the wait ends first, every read has that error.
func (d door) getMany(ctx context.Context, paths []string) []read {
	for _, p := range paths {
		if err := fits(&zk.CheckVersionRequest{Path: p}); err != nil {
			out := make([]read, len(paths))
			for i := range out {
				out[i].err = err
			}
			return out
		}
	}
	d.sent.Reads.Add(uint64(len(paths)))
	nodes := fmt.Sprintf("%d nodes", len(paths))
	if d.log.Enabled(ctx, slog.LevelDebug) {
		nodes = strings.Join(paths, " ")
	}
	out, err := await(ctx, d, "get", nodes, func() ([]read, error) {
		out := make([]read, len(paths))
		var wg sync.WaitGroup
		for i, p := range paths {
			wg.Go(func() { out[i].data, out[i].stat, out[i].err = d.conn.Get(p) })
		}
		wg.Wait()
		return out, nil
	})
	if err != nil {
		out = make([]read, len(paths))
		for i := range out {
			out[i].err = err
		}
	}
	return out
}

func (d door) exists(ctx context.Context, p string) (bool, *zk.Stat, error) {
	d.sent.Reads.Add(1)
	s, err := await(ctx, d, "exists", p, func() (stat, error) {
		ok, st, err := d.conn.Exists(p)
		return stat{st: st, exists: ok}, err
	})
	return s.exists, s.st, err
}

// existsW is exists with a one-shot watch on the node.
func (d door) existsW(ctx context.Context, p string) (bool, *zk.Stat, <-chan zk.Event, error) {
	d.sent.Reads.Add(1)
	type answer struct {
		ok bool
		st *zk.Stat
		ch <-chan zk.Event
	}
	a, err := await(ctx, d, "exists", p, func() (answer, error) {
		ok, st, ch, err := d.conn.ExistsW(p)
		return answer{ok, st, ch}, err
	})
	return a.ok, a.st, a.ch, err
}

// getW is get with a one-shot watch on the node's data (and its removal);
// unlike existsW, it sets none on a node that is not there.
func (d door) getW(ctx context.Context, p string) (*zk.Stat, <-chan zk.Event, error) {
	return d.statW(ctx, "get", p, func() (*zk.Stat, <-chan zk.Event, error) {
		_, st, ch, err := d.conn.GetW(p)
		return st, ch, err
	})
}

// childrenW is children with a one-shot watch on them; the stat is the
// folder's.
func (d door) childrenW(ctx context.Context, p string) (*zk.Stat, <-chan zk.Event, error) {
	return d.statW(ctx, "list", p, func() (*zk.Stat, <-chan zk.Event, error) {
		_, st, ch, err := d.conn.ChildrenW(p)
		return st, ch, err
	})
}

// statW runs read, op on p that sets a one-shot watch, and gives its stat
// and watch.
func (d door) statW(ctx context.Context, op, p string, read func() (*zk.Stat, <-chan zk.Event, error)) (*zk.Stat, <-chan zk.Event, error) {
	d.sent.Reads.Add(1)
	type answer struct {
		st *zk.Stat
		ch <-chan zk.Event
	}
	a, err := await(ctx, d, op, p, func() (answer, error) {
		st, ch, err := read()
		return answer{st, ch}, err
	})
	return a.st, a.ch, err
}

func (d door) children(ctx context.Context, p string) ([]string, error) {
	d.sent.Reads.Add(1)
	return await(ctx, d, "list", p, func() ([]string, error) {
		kids, _, err := d.conn.Children(p)
		return kids, err
	})
}

// sync makes this session's server catch up with the leader: a read sent
// after it sees every write the leader had applied when it answered. A
// follower answers a read from what it has applied, which may lag the
// leader's by the commits still on their way to it.
func (d door) sync(ctx context.Context, p string) error {
	d.sent.Reads.Add(1)
	_, err := await(ctx, d, "sync", p, func() (string, error) { return d.conn.Sync(p) })
	return err
}

func (d door) create(ctx context.Context, p string, data []byte, flags int32) (string, error) {
	if err := fits(&zk.CreateRequest{Path: p, Data: data}); err != nil {
		return "", err
	}
	d.sent.Writes.Add(1)
	return await(ctx, d, "create", p, func() (string, error) {
		return d.conn.Create(p, data, flags, acl)
	})
}

func (d door) delete(ctx context.Context, p string, version int32) error {
	d.sent.Writes.Add(1)
	_, err := await(ctx, d, "delete", p, func() (struct{}, error) {
		return struct{}{}, d.conn.Delete(p, version)
	})
	return err
}

// deleteWhile deletes p at version in one multi with a check that node is
// there (deleteOwn): a write, logged as the delete it is.
func (d door) deleteWhile(ctx context.Context, node, p string, version int32) ([]zk.MultiResponse, error) {
	d.sent.Writes.Add(1)
	return await(ctx, d, "delete", p, func() ([]zk.MultiResponse, error) {
		return d.conn.Multi(&zk.CheckVersionRequest{Path: node, Version: -1}, &zk.DeleteRequest{Path: p, Version: version})
	})
}

func (d door) multi(ctx context.Context, reqs ...any) ([]zk.MultiResponse, error) {
	if err := fits(reqs...); err != nil {
		return nil, err
	}
	d.sent.Writes.Add(1)
	return await(ctx, d, "multi", "", func() ([]zk.MultiResponse, error) {
		return d.conn.Multi(reqs...)
	})
}

// fits refuses a request ZooKeeper would not take: a packet over
// jute.maxbuffer makes the server close the connection, which go-zookeeper
// takes for an outage, and a request is tried again through outages, so
// one oversized request cut every request of the daemon off, again and
// again: an access request's or a submission's 200 KB of text, which
// JSON-escapes to over 1 MB (20 s, 13 closes), or a read of an id of 1 MB
// in a URL (2 closes a read, by any reader). Its size is reckoned high: a
// request's fixed fields and an ACL are under perOp bytes, and so is the
// packet's own framing (its header; a multi's op headers and closing one:
// a multi of one create is 65 bytes over its path and data). The reply to
// a node's read (its data and a stat, 88 bytes over) then fits too.
func fits(reqs ...any) error {
	const perOp = 64
	size, biggest, most := perOp, "", -1
	for _, r := range reqs {
		var data []byte
		switch r := r.(type) {
		case *zk.CreateRequest:
			data = r.Data
		case *zk.SetDataRequest:
			data = r.Data
		}
		p := reqPath(r)
		size += perOp + len(p) + len(data)
		if len(p)+len(data) > most {
			biggest, most = p, len(p)+len(data)
		}
	}
	if size <= zkconn.MaxPacket {
		return nil
	}
	if len(biggest) > 200 {
		biggest = fmt.Sprintf("%s… (a path of %d bytes)", biggest[:200], len(biggest))
	}
	return fmt.Errorf("%w: node %s: a request of about %d bytes; ZooKeeper takes at most %d in one (jute.maxbuffer)",
		ErrTooLarge, biggest, size, zkconn.MaxPacket)
}

// owns tells whether this session holds the ephemeral node st describes.
func (d door) owns(st *zk.Stat) bool {
	return st != nil && st.EphemeralOwner == d.conn.SessionID()
}
