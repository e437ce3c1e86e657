package access_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A request for what the inventory does not hold is refused at once,
// naming what is missing (a name stored in another Unicode normalization,
// the stored one: before, the two looked the same in the message); one that reaches the daemon (another tool made
// it, or storage lacks what the inventory says) fails with a message that
// names it, its token marked Failed; a requeue assembles it again.
func TestBadRequestsFailNamingWhatIsMissing(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{})
	ctx := t.Context()
	ark := r.deposit("obj-2", v1Files)
	r.deposit("obj-3", v1Files)
	two := r.deposit("obj-3", v2Files)
	nfd := r.deposit("obj-4", map[string][]byte{"cafe\u0301.txt": []byte("NFD\n")}) // as macOS's file system gives names
	for _, c := range []struct {
		req  ops.AccessRequest
		want string
	}{
		// A file of another version names it; the version's own words end the message.
		{ops.AccessRequest{ARK: two, Version: 1, Files: []string{"producer/d.txt"}},
			"object " + two + ` version 1 has no file "producer/d.txt" (version 2 has it)`},
		{ops.AccessRequest{ARK: two, Version: 7}, "object " + two + " has no version 7 (it has versions 1 to 2)"},
		{ops.AccessRequest{ARK: "ark:/99999/fk4nothere"}, "object ark:/99999/fk4nothere is not in the inventory"},
		{ops.AccessRequest{ARK: ark, Version: 7}, "object " + ark + " has no version 7 (it has only version 1)"},
		{ops.AccessRequest{ARK: ark, Files: []string{"producer/a.txt", "producer/nope.txt"}}, `has no file "producer/nope.txt"`},
		{ops.AccessRequest{ARK: ark, Format: "rar"}, `format "rar": want zip or tar.gz`},
		// One name in another Unicode normalization (typed on another system) names the stored one, apart.
		{ops.AccessRequest{ARK: nfd, Files: []string{"producer/caf\u00e9.txt"}}, `has no file "producer/caf\u00e9.txt" ` +
			`(stored as "producer/cafe\u0301.txt", the same name in another Unicode normalization: ask for it as stored)`},
		{ops.AccessRequest{ARK: "not-an-ark"}, `ark "not-an-ark": want an ARK (ark:/NAAN/NAME)`},
	} {
		_, err := r.ops.RequestAccess(ctx, c.req)
		if err == nil || !strings.HasSuffix(err.Error(), c.want) || !(errors.Is(err, queue.ErrNotFound) || errors.Is(err, ops.ErrInvalid)) {
			t.Errorf("request %+v: %v, want not found or invalid, saying %q", c.req, err, c.want)
		}
	}
	all, _, err := r.ops.ListAccess(ctx, "")
	if err != nil || len(all) != 0 {
		t.Fatalf("refused requests were queued: %v %v", all, err)
	}

	for _, c := range []struct {
		token queue.AccessToken
		want  string
	}{
		{queue.AccessToken{ARK: "ark:/99999/fk4nothere"}, "object ark:/99999/fk4nothere is not in storage"},
		{queue.AccessToken{ARK: ark, Version: 3}, "object " + ark + " has no version 3 (it has only version 1)"},
		{queue.AccessToken{ARK: ark, Files: []string{"producer/zzz.txt"}}, `object ` + ark + ` version 1 has no file "producer/zzz.txt"`},
	} {
		tok := c.token
		tok.Token, tok.Format, tok.TokenStatus = uuid.NewString(), queue.FormatZip, queue.TokenNotReady
		a, err := r.q.CreateAccess(ctx, queue.AccessSmall, tok.Map(nil))
		if err != nil {
			t.Fatal(err)
		}
		if e := r.waitFor(a.Ref(), queue.Completed, queue.Failed); e.To != string(queue.Failed) || e.From != string(queue.Processing) {
			t.Fatalf("%+v: event %s → %s, want Processing → Failed", c.token, e.From, e.To)
		}
		v, err := r.ops.ShowAccess(ctx, a.Ref())
		if err != nil {
			t.Fatal(err)
		}
		if v.State != queue.Failed || !strings.Contains(v.Message, c.want) || v.Token.TokenStatus != queue.TokenFailed || v.Locked {
			t.Errorf("%+v: %s %q token %s locked=%v; want Failed saying %q, token Failed", c.token, v.State, v.Message, v.Token.TokenStatus, v.Locked, c.want)
		}
	}

	// Requeued, a failed request is assembled again (and fails again, as
	// its object is still not there); deleted, it is Deleted.
	all, _, _ = r.ops.ListAccess(ctx, queue.Failed)
	qid := all[0].Ref
	if _, err := r.ops.RequeueAccess(ctx, qid); err != nil {
		t.Fatal(err)
	}
	if e := r.waitFor(qid, queue.Failed); !strings.Contains(e.Message, "is not in storage") {
		t.Fatalf("requeued request: %+v", e)
	}
	if o, err := r.ops.DeleteAccess(ctx, qid); err != nil || o.State != queue.Deleted {
		t.Fatalf("delete: %+v %v", o, err)
	}
}

// The small queue keeps flowing while a large request is being
// assembled: the large one is held mid-stream by its storage, three small
// requests complete meanwhile, and the large one completes once let go.
func TestSmallQueueFlowsWhileLargeAssembles(t *testing.T) {
	t.Parallel()
	stall := newStall()
	r := newRig(t, rigConfig{threshold: 4096, workers: map[string]int{queue.AccessSmall: 1, queue.AccessLarge: 1},
		source: stall.wrap})
	big := map[string][]byte{"big.bin": []byte(strings.Repeat("0123456789abcdef", 1024))} // 16 KiB, over the threshold
	bigARK := r.deposit("big", big)
	smallARK := r.deposit("small", v1Files)
	stall.arm("big.bin")

	large, err := r.ops.RequestAccess(t.Context(), ops.AccessRequest{ARK: bigARK, Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if large.Queue != queue.AccessLarge || large.Token.ContentBytes < 16384 {
		t.Fatalf("large request: queue %s, estimate %d", large.Queue, large.Token.ContentBytes)
	}
	<-stall.reached // the large request's worker is mid-stream
	for i := range 3 {
		v, _ := r.request(ops.AccessRequest{ARK: smallARK, Files: []string{producer(r.stored(smallARK)[0], "a.txt")}})
		if v.Queue != queue.AccessSmall || v.State != queue.Completed {
			t.Fatalf("small request %d: queue %s, %s %q", i, v.Queue, v.State, v.Message)
		}
	}
	if v, err := r.ops.ShowAccess(t.Context(), large.Ref); err != nil || v.State != queue.Processing || !v.Locked {
		t.Fatalf("large request while the small ones completed: %+v %v; want Processing, locked", v, err)
	}
	stall.release()
	if e := r.waitFor(large.Ref, queue.Completed, queue.Failed); e.To != string(queue.Completed) {
		t.Fatalf("large request: %s %s", e.To, e.Message)
	}
}

// stall holds the reading of one stored file until released.
type stall struct {
	name    atomic.Value // the file name (suffix) to hold
	reached chan struct{}
	free    chan struct{}
	once    sync.Once
}

func newStall() *stall {
	s := &stall{reached: make(chan struct{}), free: make(chan struct{})}
	s.name.Store("")
	return s
}

func (s *stall) arm(name string) { s.name.Store(name) }
func (s *stall) release()        { close(s.free) }

func (s *stall) wrap(r storage.Reader) storage.Reader { return stallReader{r, s} }

type stallReader struct {
	storage.Reader
	s *stall
}

func (sr stallReader) Read(ctx context.Context, ark string) (storage.Stored, error) {
	o, err := sr.Reader.Read(ctx, ark)
	if err != nil {
		return nil, err
	}
	return stallStored{o, sr.s}, nil
}

type stallStored struct {
	storage.Stored
	s *stall
}

func (so stallStored) Open(ctx context.Context, n int, name string) (io.ReadCloser, error) {
	rc, err := so.Stored.Open(ctx, n, name)
	if err != nil || !strings.HasSuffix(name, so.s.name.Load().(string)) || so.s.name.Load().(string) == "" {
		return rc, err
	}
	return &stalled{ReadCloser: rc, ctx: ctx, s: so.s}, nil
}

// stalled gives its first bytes, then waits to be let go.
type stalled struct {
	io.ReadCloser
	ctx  context.Context
	s    *stall
	read int
}

func (st *stalled) Read(p []byte) (int, error) {
	if st.read > 0 {
		st.s.once.Do(func() { close(st.s.reached) })
		select {
		case <-st.s.free:
		case <-st.ctx.Done():
			return 0, st.ctx.Err()
		}
	}
	n, err := st.ReadCloser.Read(p[:min(len(p), 1024)])
	st.read += n
	return n, err
}

// Packages expire: the daemon's sweep removes the package and its request
// (an Expired event), a package whose request was deleted, and a partial
// file no assembly is writing. The folder never serves a partial file.
func TestExpiryAndSweep(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	r := newRig(t, rigConfig{now: now, sweep: 20 * time.Millisecond})
	ark := r.deposit("obj-3", v1Files)
	kept, _ := r.request(ops.AccessRequest{ARK: ark, Version: 1})
	gone, _ := r.request(ops.AccessRequest{ARK: ark, Version: 1, Format: queue.FormatTarGz})
	dir := r.as.Dir()
	partial := filepath.Join(dir, ".partial-left-by-a-killed-daemon.zip")
	if err := os.WriteFile(partial, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := get(t, r.web.URL+"/access/.partial-left-by-a-killed-daemon.zip"); code != http.StatusNotFound {
		t.Errorf("a partial file is served: %d", code)
	}
	if code := get(t, gone.Token.URL); code != http.StatusOK {
		t.Fatalf("package not served: %d", code)
	}

	if _, err := r.ops.DeleteAccess(t.Context(), gone.Ref); err != nil {
		t.Fatal(err)
	}
	waitGone(t, filepath.Join(dir, gone.Token.Package.Name), partial)
	if code := get(t, gone.Token.URL); code != http.StatusNotFound {
		t.Errorf("a deleted request's package is served: %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, kept.Token.Package.Name)); err != nil {
		t.Fatalf("a live package was swept: %v", err)
	}

	clock.Add(int64(25 * time.Hour)) // past the default expiry of 24 h
	if e := r.waitFor(kept.Ref, "Expired"); e.From != string(queue.Completed) {
		t.Fatalf("expiry event %+v", e)
	}
	if _, err := r.q.FindAccess(t.Context(), kept.Ref); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("expired request still there: %v", err)
	}
	waitGone(t, filepath.Join(dir, kept.Token.Package.Name))
}

// waitGone waits for files to be removed (the sweep announces no
// removal but an expiry's).
func waitGone(t *testing.T, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, p := range paths {
		for {
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is still there", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A held access queue takes no request: the small queue held, its
// request stays Pending while a large one completes; released, it
// completes too.
func TestHoldsRespected(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{threshold: 64})
	ark := r.deposit("obj-4", v1Files)
	ctx := t.Context()
	if _, err := r.ops.HoldQueue(ctx, "access-small"); err != nil {
		t.Fatal(err)
	}
	a := producer(r.stored(ark)[0], "a.txt")
	held, err := r.ops.RequestAccess(ctx, ops.AccessRequest{ARK: ark, Files: []string{a}})
	if err != nil || held.Queue != queue.AccessSmall {
		t.Fatalf("small request: %+v %v", held, err)
	}
	if v, _ := r.request(ops.AccessRequest{ARK: ark}); v.Queue != queue.AccessLarge || v.State != queue.Completed {
		t.Fatalf("large request: %s %s %q", v.Queue, v.State, v.Message)
	}
	if v, err := r.ops.ShowAccess(ctx, held.Ref); err != nil || v.State != queue.Pending || v.Locked {
		t.Fatalf("request on the held queue: %+v %v; want Pending, not taken", v, err)
	}
	if _, err := r.ops.ReleaseQueue(ctx, "access-small"); err != nil {
		t.Fatal(err)
	}
	if e := r.waitFor(held.Ref, queue.Completed, queue.Failed); e.To != string(queue.Completed) {
		t.Fatalf("released request: %s %s", e.To, e.Message)
	}
}

// An access request for an object of a profile whose storage target holds
// no OCFL storage root (nothing was stored there, or the profile names the
// wrong place) fails at its first try, naming the profile and the place,
// its token Failed, and writes nothing there: an empty folder, a folder
// that is not there. A request for an object at a root still completes.
func TestAccessToATargetWithoutARootWritesNothing(t *testing.T) {
	t.Parallel()
	t.Run("empty folder", func(t *testing.T) {
		t.Parallel()
		accessWithoutRoot(t, t.TempDir())
	})
	t.Run("no folder", func(t *testing.T) {
		t.Parallel()
		accessWithoutRoot(t, filepath.Join(t.TempDir(), "mistyped"))
	})
}

// The same with the target an empty prefix of a bucket.
func TestAccessToAnEmptyBucketPrefixWritesNothing(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	accessWithoutRoot(t, srv.URL(srv.Addr, "empty"))
}

// accessWithoutRoot requests an object the inventory records for a
// profile whose own target is target, where nothing was stored, then one
// of the default profile's.
func accessWithoutRoot(t *testing.T, target string) {
	moved := profile.Default()
	moved.Name, moved.Storage = "moved", target
	r := newRig(t, rigConfig{profiles: []*profile.Profile{moved}})
	ark := "ark:/99999/fk4moved"
	if err := r.p.Inventory().Record(t.Context(), inventory.Record{ARK: ark, Profile: moved.Name, Version: 1,
		Files: []inventory.FileRow{{Name: "a.txt", Size: 3, SHA256: sum([]byte("one"))}}}); err != nil {
		t.Fatal(err)
	}
	before := keysAt(t, target)

	v, e := r.request(ops.AccessRequest{ARK: ark})
	if e.To != string(queue.Failed) || e.From != string(queue.Processing) || v.Token.TokenStatus != queue.TokenFailed ||
		!strings.Contains(v.Message, `profile "moved"`) || !strings.Contains(v.Message, "no OCFL storage root at") ||
		!strings.Contains(v.Message, "nothing was ever stored there, or its profile names the wrong place") {
		t.Errorf("request of %s: %s → %s %q, token %s; want Failed naming profile moved and no OCFL storage root",
			ark, e.From, e.To, v.Message, v.Token.TokenStatus)
	}
	if n := r.sourced.Load(); n != 1 {
		t.Errorf("the request was tried %d times, want once: no retry finds a root", n)
	}
	if after := keysAt(t, target); !slices.Equal(after, before) {
		t.Fatalf("the access request wrote to %s: it held %q, then %q", target, before, after)
	}

	stored := r.deposit("obj-5", v1Files)
	if v, _ := r.request(ops.AccessRequest{ARK: stored}); v.State != queue.Completed || v.Token.TokenStatus != queue.TokenReady {
		t.Errorf("request of %s at the default root: %s %q, token %s", stored, v.State, v.Message, v.Token.TokenStatus)
	}
}

// keysAt is what target holds (an S3 prefix's keys, a folder's files), or
// "(no folder)". It writes nothing.
func keysAt(t *testing.T, target string) []string {
	t.Helper()
	pl, err := place.OpenExisting(t.Context(), target)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{"(no folder)"}
	}
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pl.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// A zip package larger than the room left in the folder fails at its first
// try, before a byte is written, naming the folder, the sizes and what to
// do; it is not tried again (each try would fill the disk, the data
// folder's by default, until the write failed). A tar.gz, whose size is
// known only once compressed, is written. Before, the zip was written
// until the disk was full, three tries, and failed "no space left on
// device".
func TestAPackageLargerThanTheRoomLeftFails(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{free: func(string) (uint64, error) { return 1000, nil }})
	ark := r.deposit("obj-room", v1Files)
	before := r.sourced.Load()
	v, e := r.request(ops.AccessRequest{ARK: ark})
	dir := filepath.Join(r.data, "access")
	for _, want := range []string{"no room for the package in " + dir + " (--access-dir", "1000 B is free",
		"give --access-dir a larger folder, then ingestq access requeue " + v.Ref} {
		if e.To != string(queue.Failed) || !strings.Contains(v.Message, want) {
			t.Fatalf("%s: %s %q, want Failed saying %q", v.Ref, e.To, v.Message, want)
		}
	}
	if tries := r.sourced.Load() - before; tries != 1 {
		t.Errorf("the request was tried %d times, want once", tries)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Errorf("the folder holds %v (%v), want nothing", left, err)
	}
	if v, e := r.request(ops.AccessRequest{ARK: ark, Format: queue.FormatTarGz}); e.To != string(queue.Completed) {
		t.Errorf("the tar.gz: %s %q, want Completed", e.To, v.Message)
	}
}

// A zip that fits the room left only while another package being written
// here is counted as not yet written waits for that one to end, and is
// refused then if the room it left does not hold it: two zips checked at
// once against the same free space no longer both start and fill the disk.
// Before, the second passed its check while the first was mid-stream (the
// first's partial file still empty) and was written beside it: two 16 KiB
// packages in a 24 KiB folder.
func TestZipsWrittenAtOnceShareTheRoom(t *testing.T) {
	t.Parallel()
	stall := newStall()
	const room = 24 << 10
	var dir atomic.Value
	checked := make(chan struct{}, 16) // each look at the room
	free := func(string) (uint64, error) {
		used := uint64(0)
		des, err := os.ReadDir(dir.Load().(string))
		for _, de := range des {
			if fi, ierr := de.Info(); ierr == nil {
				used += uint64(fi.Size())
			}
		}
		select {
		case checked <- struct{}{}:
		default:
		}
		return room - min(room, used), err
	}
	r := newRig(t, rigConfig{workers: map[string]int{queue.AccessSmall: 2}, free: free, source: stall.wrap})
	dir.Store(filepath.Join(r.data, "access"))
	block := []byte(strings.Repeat("0123456789abcdef", 1024)) // 16 KiB
	first, second := r.deposit("room-1", map[string][]byte{"one.bin": block}), r.deposit("room-2", map[string][]byte{"two.bin": block})
	stall.arm("one.bin")
	a, err := r.ops.RequestAccess(t.Context(), ops.AccessRequest{ARK: first})
	if err != nil {
		t.Fatal(err)
	}
	<-stall.reached // the first zip is being written
	for len(checked) > 0 {
		<-checked
	}
	b, err := r.ops.RequestAccess(t.Context(), ops.AccessRequest{ARK: second})
	if err != nil {
		t.Fatal(err)
	}
	<-checked // the second has looked at the room while the first is written
	stall.release()
	if e := r.waitFor(a.Ref, queue.Completed, queue.Failed); e.To != string(queue.Completed) {
		t.Fatalf("the first zip: %s %q, want Completed", e.To, e.Message)
	}
	want := "no room for the package in " + dir.Load().(string)
	if e := r.waitFor(b.Ref, queue.Completed, queue.Failed); e.To != string(queue.Failed) || !strings.Contains(e.Message, want) {
		t.Fatalf("the second zip: %s %q, want Failed saying %q", e.To, e.Message, want)
	}
}

// A stored file that reads other bytes than recorded fails its request
// naming the copy read (the OCFL root in a bucket, and the content key),
// and what to do: audit, restore, requeue.
func TestADamagedStoredFileNamesTheCopyRead(t *testing.T) {
	srv := s3test.Start(t)
	srv.SetEnv(t) // not parallel: the AWS_* variables are the process's
	root := srv.URL(srv.Addr, "ocfl")
	r := newRig(t, rigConfig{storage: []string{root}})
	ark := r.deposit("obj-1", v1Files)
	a := producer(r.stored(ark)[0], "a.txt")
	keys := keysAt(t, root)
	i := slices.IndexFunc(keys, func(k string) bool { return strings.HasSuffix(k, "/v1/content/"+a) })
	if i < 0 {
		t.Fatalf("no content key of %s among %q", a, keys)
	}
	pl, err := place.OpenExisting(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	damaged := []byte("ALPHA\n")
	if err := pl.Put(t.Context(), keys[i], strings.NewReader(string(damaged)), int64(len(damaged)), sum(damaged)); err != nil {
		t.Fatal(err)
	}
	v, _ := r.request(ops.AccessRequest{ARK: ark})
	for _, want := range []string{
		"stored file \"" + a + "\" of " + ark + " version 1 reads as 6 bytes with sha256 " + sum(damaged),
		"(the copy read: s3://",
		"/" + keys[i] + ")",
		"`ingestq audit " + ark + "` checks every stored copy of the object: restore this file from a sound copy, then `ingestq access requeue " + v.Ref + "`",
	} {
		if v.State != queue.Failed || !strings.Contains(v.Message, want) {
			t.Errorf("request: %s %q; want Failed saying %q", v.State, v.Message, want)
		}
	}
}
