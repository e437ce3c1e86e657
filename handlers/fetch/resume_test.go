package fetch

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/durable"
)

func sha256Want(t *testing.T, data []byte) Want {
	return Want{Alg: "sha256", Digest: digestOf(t, "sha256", data), Size: int64(len(data))}
}

// The file is larger than durable.WritebackEvery and cut past it: the bytes
// handed to writeback before the cut are kept, and the rest follow them.
func TestDownloadResumesAfterCut(t *testing.T) {
	data := payload(3*durable.WritebackEvery+400_000, 10)
	const at = durable.WritebackEvery + 123_457
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 0 {
			cut(t, w, data, at)
			return true
		}
		return false
	})
	path := dest(t)
	var progress counter
	res, err := testClient(Config{}).Download(context.Background(), o.file(), path, sha256Want(t, data), progress.add)
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	if !res.Resumed || res.Bytes != int64(len(data)) || res.Digest != digestOf(t, "sha256", data) {
		t.Fatalf("result %+v, want a resumed download", res)
	}
	reqs := o.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if got := reqs[1].Get("Range"); got != "bytes="+strconv.Itoa(at)+"-" {
		t.Fatalf("second request has Range %q", got)
	}
	if got := reqs[1].Get("If-Range"); got != etag {
		t.Fatalf("second request has If-Range %q, want %s", got, etag)
	}
	if progress.n.Load() != int64(len(data)) {
		t.Fatalf("progress added up to %d", progress.n.Load())
	}
}

// Cut past durable.WritebackEvery: the restart truncates bytes already handed to
// writeback.
func TestDownloadServerIgnoresRange(t *testing.T) {
	data := payload(2*durable.WritebackEvery+200_000, 11)
	const at = durable.WritebackEvery + 70_000
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		switch n {
		case 0:
			cut(t, w, data, at)
		default:
			r.Header.Del("Range") // answer 200 with the whole file
			serve(w, r, data)
		}
		return true
	})
	path := dest(t)
	var progress counter
	res, err := testClient(Config{}).Download(context.Background(), o.file(), path, sha256Want(t, data), progress.add)
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	if res.Resumed {
		t.Fatal("Resumed although the server sent the whole file again")
	}
	if reqs := o.requests(); len(reqs) != 2 || reqs[1].Get("Range") != "bytes="+strconv.Itoa(at)+"-" {
		t.Fatalf("requests %v: want a second one with a Range", reqs)
	}
	if progress.n.Load() != int64(len(data)) {
		t.Fatalf("progress added up to %d after a restart", progress.n.Load())
	}
}

func TestDownloadResumesLeftoverPart(t *testing.T) {
	data := payload(300_000, 12)
	o := newOrigin(t, data, nil)
	path := dest(t)
	// A process killed mid-transfer left this.
	if err := os.WriteFile(path+".part", data[:100_000], 0o644); err != nil {
		t.Fatal(err)
	}
	var progress counter
	want := Want{Alg: "md5", Digest: digestOf(t, "md5", data), Size: int64(len(data))}
	res, err := testClient(Config{}).Download(context.Background(), o.file(), path, want, progress.add)
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	// Both digests cover the bytes of the earlier call too.
	if !res.Resumed || res.Digest != want.Digest || res.SHA256 != digestOf(t, "sha256", data) {
		t.Fatalf("result %+v", res)
	}
	reqs := o.requests()
	if len(reqs) != 1 || reqs[0].Get("Range") != "bytes=100000-" || reqs[0].Get("If-Range") != "" {
		t.Fatalf("requests %v: want one from byte 100000 without If-Range", reqs)
	}
	if progress.n.Load() != int64(len(data)) {
		t.Fatalf("progress added up to %d", progress.n.Load())
	}
}

func TestDownloadCompleteLeftoverPart(t *testing.T) {
	data := payload(30_000, 13)
	for _, size := range []int64{int64(len(data)), -1} {
		o := newOrigin(t, data, nil)
		path := dest(t)
		if err := os.WriteFile(path+".part", data, 0o644); err != nil {
			t.Fatal(err)
		}
		want := sha256Want(t, data)
		want.Size = size
		res, err := testClient(Config{}).Download(context.Background(), o.file(), path, want, nil)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		wantFile(t, path, data)
		if !res.Resumed {
			t.Fatalf("size %d: not Resumed", size)
		}
		// Known size: nothing to ask. Unknown: the server answers 416.
		if n := len(o.requests()); (size >= 0) != (n == 0) {
			t.Fatalf("size %d: %d requests", size, n)
		}
	}
}

func TestDownloadStaleLeftoverPart(t *testing.T) {
	data := payload(100_000, 14)
	o := newOrigin(t, data, nil)
	path := dest(t)
	// Left by a download of an older version of the file.
	if err := os.WriteFile(path+".part", payload(40_000, 15), 0o644); err != nil {
		t.Fatal(err)
	}
	var progress counter
	res, err := testClient(Config{}).Download(context.Background(), o.file(), path, sha256Want(t, data), progress.add)
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	if res.Resumed {
		t.Fatal("Resumed, but the file had to come from zero")
	}
	reqs := o.requests()
	if len(reqs) != 2 || reqs[0].Get("Range") != "bytes=40000-" || reqs[1].Get("Range") != "" {
		t.Fatalf("requests %v: want a resume, then a fresh download", reqs)
	}
	if progress.n.Load() != int64(len(data)) {
		t.Fatalf("progress added up to %d", progress.n.Load())
	}
}

func TestDownloadResumesAfterStall(t *testing.T) {
	data := payload(200_000, 16)
	done := make(chan struct{})
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 0 {
			stallAfter(w, r, data, 80_000, done)
			return true
		}
		return false
	})
	t.Cleanup(func() { close(done) }) // before the server's Close
	path := dest(t)
	res, err := testClient(Config{Timeout: 200 * time.Millisecond}).Download(context.Background(), o.file(), path, sha256Want(t, data), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantFile(t, path, data)
	reqs := o.requests()
	if !res.Resumed || len(reqs) < 2 || reqs[len(reqs)-1].Get("Range") != "bytes=80000-" {
		t.Fatalf("result %+v, requests %v: want a resume from byte 80000", res, reqs)
	}
}

func TestDownloadGivesUpOnStalls(t *testing.T) {
	data := payload(10_000, 17)
	done := make(chan struct{})
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		stallAfter(w, r, data, 0, done)
		return true
	})
	t.Cleanup(func() { close(done) })
	_, err := testClient(Config{Attempts: 2, Timeout: 500 * time.Millisecond}).Download(context.Background(), o.file(), dest(t), Want{Size: -1}, nil)
	if err == nil || Permanent(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, o.file()) || !strings.Contains(msg, "(2 requests)") || !strings.Contains(msg, "stalled") {
		t.Fatalf("error %q should name the URL, the attempts and the stall", msg)
	}
}

func TestDownloadCancel(t *testing.T) {
	data := payload(100_000, 18)
	done := make(chan struct{})
	o := newOrigin(t, data, func(n int, w http.ResponseWriter, r *http.Request) bool {
		stallAfter(w, r, data, 30_000, done)
		return true
	})
	t.Cleanup(func() { close(done) })
	path := dest(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got int64
	progress := func(d int64) {
		if got += d; got == 30_000 {
			cancel() // everything the server will send has arrived
		}
	}
	_, err := testClient(Config{}).Download(ctx, o.file(), path, sha256Want(t, data), progress)
	if !errors.Is(err, context.Canceled) || Permanent(err) {
		t.Fatalf("err = %v, want a cancellation", err)
	}
	st, err := os.Stat(path + ".part")
	if err != nil || st.Size() != 30_000 {
		t.Fatalf(".part: %v, %v: want it kept with 30000 bytes to resume", st, err)
	}
	wantNoFile(t, path)
}
