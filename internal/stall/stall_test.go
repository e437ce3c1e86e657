package stall

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// idle is the tests' limit: short, yet many times a loaded machine's
// scheduling delay.
const idle = 300 * time.Millisecond

// serve starts a real HTTP server running h, whose handler can block on
// hold until the test ends, and a client through Transport.
func serve(t *testing.T, h func(w http.ResponseWriter, r *http.Request, hold <-chan struct{})) (*httptest.Server, *http.Client) {
	t.Helper()
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, hold) }))
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(srv.Close) // runs last: the handlers have been let go
	t.Cleanup(base.CloseIdleConnections)
	t.Cleanup(func() { close(hold) })
	return srv, &http.Client{Transport: Transport(base, idle)}
}

// wait blocks a handler until the client goes or the test ends.
func wait(r *http.Request, hold <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-hold:
	}
}

// stalled fails the test unless err is a stall: ErrStalled, a timeout.
func stalled(t *testing.T, err error, start time.Time) {
	t.Helper()
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("error %v: want a stall", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("error %v: want a timeout (net.Error)", err)
	}
	if took := time.Since(start); took < idle {
		t.Fatalf("failed after %v, before the limit %v", took, idle)
	}
}

func TestServerThatStopsReadingTheBodyStalls(t *testing.T) {
	srv, client := serve(t, func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		_, _ = io.CopyN(io.Discard, r.Body, 1<<20) // reads 1 MiB, then no more
		wait(r, hold)
	})
	// 256 MiB is far more than the sockets' buffers hold.
	body := io.LimitReader(zeros{}, 256<<20)
	start := time.Now()
	resp, err := client.Post(srv.URL, "application/octet-stream", body)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("answered %s: want a stall", resp.Status)
	}
	stalled(t, err, start)
}

func TestServerThatNeverAnswersStalls(t *testing.T) {
	srv, client := serve(t, func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) { wait(r, hold) })
	start := time.Now()
	resp, err := client.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("answered %s: want a stall", resp.Status)
	}
	stalled(t, err, start)
}

func TestAnswerThatStopsMidBodyStalls(t *testing.T) {
	srv, client := serve(t, func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		w.Header().Set("Content-Length", "2000")
		_, _ = w.Write(bytes.Repeat([]byte("a"), 1000))
		w.(http.Flusher).Flush()
		wait(r, hold)
	})
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	got, err := io.ReadAll(resp.Body)
	stalled(t, err, start)
	if len(got) != 1000 {
		t.Fatalf("read %d bytes before the stall, want the 1000 sent", len(got))
	}
}

// A transfer that moves a little more often than the limit, for several
// limits in all, is not cut, either way.
func TestSlowMovingTransfersAreNotCut(t *testing.T) {
	const chunks, chunk = 8, 1000
	every := idle / 3
	srv, client := serve(t, func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		if r.Method == http.MethodPost {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, n)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(chunks*chunk))
		for range chunks {
			_, _ = w.Write(bytes.Repeat([]byte("a"), chunk))
			w.(http.Flusher).Flush()
			time.Sleep(every) // the slowness under test
		}
	})

	t.Run("answer", func(t *testing.T) {
		start := time.Now()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil || len(got) != chunks*chunk {
			t.Fatalf("read %d bytes, %v: want all %d", len(got), err, chunks*chunk)
		}
		if took := time.Since(start); took < 2*idle {
			t.Fatalf("the transfer took %v: not slow enough to test the limit %v", took, idle)
		}
	})
	t.Run("request body", func(t *testing.T) {
		start := time.Now()
		resp, err := client.Post(srv.URL, "application/octet-stream", &slowReader{n: chunks, chunk: chunk, every: every})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || string(got) != strconv.Itoa(chunks*chunk) {
			t.Fatalf("answer %s %q, %v: want the server to have read all %d bytes", resp.Status, got, err, chunks*chunk)
		}
		if took := time.Since(start); took < 2*idle {
			t.Fatalf("the transfer took %v: not slow enough to test the limit %v", took, idle)
		}
	})
}

// A reader that pauses between its reads longer than the limit (a slow
// disk) is not cut: the clock runs only while a read waits.
func TestReaderSlowBetweenReadsIsNotCut(t *testing.T) {
	const size = 3000
	srv, client := serve(t, func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		_, _ = w.Write(bytes.Repeat([]byte("a"), size))
	})
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got int
	buf := make([]byte, 1000)
	for {
		time.Sleep(2 * idle) // the reader's pause under test
		n, err := resp.Body.Read(buf)
		got += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
	}
	if got != size {
		t.Fatalf("read %d bytes, want %d", got, size)
	}
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// slowReader gives n chunks, one each every.
type slowReader struct {
	n, chunk int
	every    time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.every)
	s.n--
	return copy(p, bytes.Repeat([]byte("b"), min(s.chunk, len(p)))), nil
}
