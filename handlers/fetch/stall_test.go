package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// A server that stops reading a request's body midway (as a storage
// service frozen during an upload) fails the request once it has moved no
// byte for Timeout, a timeout error (a back end's is a back end out); the
// back ends' client sends it twice, not Attempts times. Before, nothing
// bounded the upload: the request waited for as long as the server.
func TestStalledUploadFails(t *testing.T) {
	var hits atomic.Int32
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.CopyN(io.Discard, r.Body, 64<<10)
		<-done // reads no more
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // before srv.Close, which waits for the handlers
	c := testClient(Config{Attempts: 5, Timeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	body := bytes.Repeat([]byte("x"), 64<<20) // more than the sockets hold
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := c.BackEnd().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !strings.Contains(err.Error(), "stalled: no byte moved for 300ms") {
		t.Fatalf("after %v: err = %v; want a timeout, stalled: no byte moved for 300ms", time.Since(start), err)
	}
	if n := hits.Load(); n != backEndTries {
		t.Errorf("the server got %d requests; want %d", n, backEndTries)
	}
}
