package fetch

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPerHostBound runs 20 downloads and 5 HEADs at once against a server
// that counts the requests in flight. The server holds the first requests
// until all the others are queued for a slot (or the bound is broken), so
// the bound is both reached and, if broken, seen broken.
func TestPerHostBound(t *testing.T) {
	const perHost, downloads, heads = 3, 20, 5
	data := payload(40_000, 40)
	var inflight, peak atomic.Int64
	arrived := make(chan struct{}, downloads+heads)
	gate := make(chan struct{})
	over := make(chan struct{})
	var overOnce sync.Once
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		now := inflight.Add(1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		if now > perHost {
			overOnce.Do(func() { close(over) })
		}
		arrived <- struct{}{}
		select {
		case <-gate:
		case <-over:
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if r.Method == http.MethodHead {
			inflight.Add(-1)
			return true
		}
		// Leave the count before the last byte: the client cannot have
		// given its slot back before it has that byte.
		w.Write(data[:len(data)-1])
		http.NewResponseController(w).Flush()
		inflight.Add(-1)
		w.Write(data[len(data)-1:])
		return true
	})

	c := testClient(Config{PerHost: perHost})
	queued := make(chan struct{}, downloads+heads)
	c.rc.HTTPClient.Transport.(*limiter).onQueue = func() { queued <- struct{}{} }
	dir := t.TempDir()
	want := sha256Want(t, data)
	var wg sync.WaitGroup
	errs := make(chan error, downloads+heads)
	for i := range downloads {
		wg.Go(func() {
			_, err := c.Download(context.Background(), o.file(), filepath.Join(dir, fmt.Sprint(i)), want, nil)
			errs <- err
		})
	}
	for range heads {
		wg.Go(func() {
			if n, err := c.Head(context.Background(), o.file()); err != nil || n != int64(len(data)) {
				errs <- fmt.Errorf("Head = %d, %v", n, err)
			}
		})
	}
	func() {
		for range perHost {
			select {
			case <-arrived:
			case <-over:
				return
			}
		}
		for range downloads + heads - perHost {
			select {
			case <-queued:
			case <-over:
				return
			}
		}
	}()
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := peak.Load(); got != perHost {
		t.Fatalf("peak of %d requests in flight, want %d", got, perHost)
	}
	if n := len(o.requests()); n != downloads+heads {
		t.Fatalf("%d requests, want %d", n, downloads+heads)
	}
}

// TestPerHostIsPerHost checks that one busy host does not hold up another.
func TestPerHostIsPerHost(t *testing.T) {
	data := payload(1000, 41)
	release := make(chan struct{})
	entered := make(chan struct{})
	slow := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		entered <- struct{}{}
		<-release
		return false
	})
	fast := newOrigin(t, data, nil)
	c := testClient(Config{PerHost: 1})
	done := make(chan error, 1)
	go func() {
		_, err := c.Download(context.Background(), slow.file(), dest(t), Want{Size: 1000}, nil)
		done <- err
	}()
	<-entered // the slow host's only slot is taken
	path := dest(t)
	if _, err := c.Download(context.Background(), fast.file(), path, Want{Size: 1000}, nil); err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
