// Package access assembles access requests: a stored object, one of its
// versions or some of its files, streamed from storage into one zip or
// tar.gz package, verified, and published where the request's collection
// (its profile) or the daemon says: the local folder the daemon's HTTP
// server serves at /access/<name>, or an S3 prefix, fetched by a
// presigned URL. Packages expire and are swept.
//
// A package is written in the folder under a hidden partial name, its
// SHA-256 computed as it is written; it is then read back (its digest, and
// every entry's against the stored file's) and only then published: a
// rename, or an S3 upload complete only when whole. A daemon killed
// mid-assembly leaves only a partial file, which its next try replaces and
// the sweep removes.
package access

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Config wires an Assembler.
type Config struct {
	Queue *queue.Queue
	// Source is the storage an object of profile (the request's; "" when
	// none) is read from.
	Source func(ctx context.Context, profile string) (storage.Reader, error)
	// Dir is the local folder packages are written in, and published in
	// when they go to the folder.
	Dir string
	// To is where packages go by default: "" (or "folder") for Dir, or an
	// s3:// URL; ProfileTo overrides it by profile.
	To        string
	ProfileTo map[string]string
	Advertise string        // the daemon's HTTP server as others reach it; "" gives file: URLs
	Host      string        // this daemon's name, in the packages it makes
	Expiry    time.Duration // how long a package stays; default DefaultExpiry
	Now       func() time.Time
	// FreeSpace is the room left in Dir's file system; default what df
	// counts free (handlers.DiskSpace).
	FreeSpace func(dir string) (uint64, error)
	// Gone says what became of access request ref, no longer in the queue
	// (who deleted it and when, from the recorded events), with how to ask
	// again, for the folder server's 410; nil: it says what ZooKeeper tells.
	Gone   func(ctx context.Context, ref string) error
	Logger *slog.Logger
}

// DefaultExpiry is how long a package stays by default.
const DefaultExpiry = 24 * time.Hour

// Prefix is where the daemon's HTTP server serves the folder's packages.
const Prefix = "/access/"

// Assembler makes packages of access requests (a reactor.AccessHandler).
type Assembler struct {
	cfg   Config
	log   *slog.Logger
	dflt  destination
	byPro map[string]destination

	mu      sync.Mutex
	writing map[string]bool // package names being written here
	served  served          // the folder's packages' requests

	roomMu  sync.Mutex
	writers int           // packages past claimRoom, being written here
	claimed uint64        // the files of the zips among them
	ended   chan struct{} // closed, and replaced, when one of them ends
}

var _ reactor.AccessHandler = (*Assembler)(nil)

// New opens the destinations; an S3 one must answer.
func New(ctx context.Context, cfg Config) (*Assembler, error) {
	if cfg.Queue == nil || cfg.Source == nil || cfg.Dir == "" {
		return nil, errors.New("access: Queue, Source and Dir are required")
	}
	if cfg.Expiry < 0 {
		return nil, fmt.Errorf("access: expiry %v: want a positive duration", cfg.Expiry)
	}
	if cfg.Expiry == 0 {
		cfg.Expiry = DefaultExpiry
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FreeSpace == nil {
		cfg.FreeSpace = func(dir string) (uint64, error) {
			free, _, err := handlers.DiskSpace(dir)
			return free, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o750)
	}
	if err != nil {
		return nil, fmt.Errorf("access: folder %s: %w", cfg.Dir, err)
	}
	cfg.Dir = dir
	as := &Assembler{cfg: cfg, log: cfg.Logger, byPro: map[string]destination{}, writing: map[string]bool{}, ended: make(chan struct{})}
	if as.dflt, err = openDestination(ctx, cfg.To, dir, cfg.Advertise); err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	for prof, to := range cfg.ProfileTo {
		if to == "" {
			continue
		}
		if as.byPro[prof], err = openDestination(ctx, to, dir, cfg.Advertise); err != nil {
			return nil, fmt.Errorf("access: profile %s: %w", prof, err)
		}
	}
	for _, d := range as.destinations() {
		if d.kind() == "s3" && cfg.Expiry > place.MaxPresign {
			return nil, fmt.Errorf("access: expiry %v: packages in %s are fetched by presigned URLs, valid %v at most", cfg.Expiry, d.location(), place.MaxPresign)
		}
	}
	return as, nil
}

// Dir is the folder packages are written in.
func (as *Assembler) Dir() string { return as.cfg.Dir }

func (as *Assembler) destFor(profile string) destination {
	if d, ok := as.byPro[profile]; ok {
		return d
	}
	return as.dflt
}

// tokenShape is a request's token as ops.RequestAccess makes it, a uuid in
// lower case. It becomes part of the package's name, which it alone makes
// unguessable, and only names holding one are packages (isPackage): a
// package named by any other token could be neither fetched nor swept.
const tokenShape = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`

var tokenRE = regexp.MustCompile(`^` + tokenShape + `$`)

// Assemble makes the request's package and returns its token with the
// result. A bad request (unknown object, version or file, a malformed
// token) is a fatal error, with the token marked Failed; any other error
// may pass on a retry.
func (as *Assembler) Assemble(ctx context.Context, a *queue.Access) (map[string]any, error) {
	t, err := a.AccessToken()
	if err == nil {
		err = checkToken(t)
	}
	if err != nil {
		return failed(a, t, err)
	}
	src, err := as.cfg.Source(ctx, t.Profile)
	if err != nil {
		return nil, err
	}
	o, err := src.Read(ctx, t.ARK)
	if errors.Is(err, storage.ErrNotFound) {
		return failed(a, t, fmt.Errorf("object %s is not in storage", t.ARK))
	}
	if err != nil {
		return nil, err
	}
	entries, err := selectFiles(o, t)
	if err != nil {
		return failed(a, t, err)
	}
	pkg, url, err := as.make(ctx, t, o, entries)
	if errors.Is(err, syscall.ENOSPC) {
		err = as.noRoom(a, entries)
	}
	var fe *fixityError
	if errors.As(err, &fe) {
		fe.ref = a.Ref()
	}
	if fe != nil || errors.As(err, new(unservedError)) || errors.As(err, new(noRoomError)) {
		return failed(a, t, err)
	}
	if err != nil {
		return nil, err
	}
	t.TokenStatus, t.URL, t.Package = queue.TokenReady, url, pkg
	as.served.remember(pkg.Name, servedBy{ref: a.Ref(), ark: t.ARK})
	return t.Map(a.Token), nil
}

func checkToken(t queue.AccessToken) error {
	switch {
	case !tokenRE.MatchString(t.Token):
		return fmt.Errorf("token %q: want a uuid in lower case, as ingestq's access requests have", t.Token)
	case t.Version < 0:
		return fmt.Errorf("version %d: want 1 or more", t.Version)
	case t.Format != queue.FormatZip && t.Format != queue.FormatTarGz:
		return fmt.Errorf("format %q: want %s or %s", t.Format, queue.FormatZip, queue.FormatTarGz)
	}
	return storage.CheckARK(t.ARK)
}

// failed is a bad request's outcome: its token marked Failed, and the
// error, fatal.
func failed(a *queue.Access, t queue.AccessToken, err error) (map[string]any, error) {
	t.TokenStatus = queue.TokenFailed
	return t.Map(a.Token), reactor.Fatal(err)
}

// make writes, verifies and publishes the package.
func (as *Assembler) make(ctx context.Context, t queue.AccessToken, o storage.Stored, entries []entry) (*queue.AccessPackage, string, error) {
	name := packageName(t)
	tmp := filepath.Join(as.cfg.Dir, partialPrefix+name)
	as.mu.Lock()
	as.writing[name] = true
	as.mu.Unlock()
	var release func()
	defer func() {
		as.mu.Lock()
		delete(as.writing, name)
		as.mu.Unlock()
		_ = os.Remove(tmp) // gone once published; a failed try's leftovers
		if release != nil {
			release() // once the partial file is gone: a zip waiting sees its room
		}
	}()
	release, err := as.claimRoom(ctx, tmp, t.Format, uint64(filesSize(entries)))
	if err != nil {
		return nil, "", err
	}
	began := time.Now()
	size, sum, err := writeFile(ctx, tmp, t, o, entries)
	if err != nil {
		return nil, "", err
	}
	written := time.Now()
	if err := verify(ctx, tmp, t.Format, sum, entries); err != nil {
		return nil, "", err
	}
	verified := time.Now()
	dest := as.destFor(t.Profile)
	expires := as.cfg.Now().Add(as.cfg.Expiry).UTC().Truncate(time.Second)
	url, err := dest.publish(ctx, tmp, name, size, sum, expires)
	if err != nil {
		return nil, "", fmt.Errorf("publish package %s to %s: %w", name, dest.location(), err)
	}
	as.log.Info("access: package published", "ark", t.ARK, "name", name, "bytes", size, "entries", len(entries), "to", dest.location(),
		"written_in", written.Sub(began).Round(time.Millisecond), "verified_in", verified.Sub(written).Round(time.Millisecond),
		"published_in", time.Since(verified).Round(time.Millisecond))
	return &queue.AccessPackage{Name: name, Size: size, SHA256: sum, Entries: len(entries), Expires: expires.Format(time.RFC3339),
		Where: dest.kind(), Location: dest.location(), Host: as.cfg.Host}, url, nil
}

// claimRoom waits until a package of format, its files size bytes, fits
// in the folder, and claims that room until release. A zip stores its
// files as they are: one larger than the room left is refused before a
// byte is written (syscall.ENOSPC), rather than filling the disk (the data
// folder's, by default) until the write fails. A tar.gz's size is known
// only once compressed: it claims nothing. The room left counts a killed
// try's partial file (tmp, replaced) as free, and the zips being written
// here as taken whole (what they wrote already twice: two zips checked at
// once no longer both start and fill the disk). A zip that does not fit
// while other packages are being written here waits for one to end (its
// partial file leaves for S3, or becomes a package, or goes); it is
// refused once none is.
func (as *Assembler) claimRoom(ctx context.Context, tmp, format string, size uint64) (release func(), err error) {
	if format != queue.FormatZip {
		size = 0
	}
	as.roomMu.Lock()
	defer as.roomMu.Unlock()
	for size > 0 {
		free, ferr := as.cfg.FreeSpace(as.cfg.Dir)
		if ferr != nil {
			break // the room unknown: a full disk still stops the write
		}
		if fi, serr := os.Stat(tmp); serr == nil {
			free += uint64(fi.Size())
		}
		if size <= free-min(free, as.claimed) {
			break
		}
		if as.writers == 0 {
			return nil, syscall.ENOSPC
		}
		ended := as.ended
		as.roomMu.Unlock()
		select {
		case <-ended:
			as.roomMu.Lock()
		case <-ctx.Done():
			as.roomMu.Lock()
			return nil, ctx.Err()
		}
	}
	as.writers++
	as.claimed += size
	return func() {
		as.roomMu.Lock()
		defer as.roomMu.Unlock()
		as.writers--
		as.claimed -= size
		close(as.ended)
		as.ended = make(chan struct{})
	}, nil
}

// noRoomError is a package the folder has no room for: the request
// fails, naming the folder and what to do; a retry would fill the disk
// again.
type noRoomError struct{ msg string }

func (e noRoomError) Error() string { return e.msg }

// noRoom is the error of a's package that does not fit in the folder,
// with the room now left.
func (as *Assembler) noRoom(a *queue.Access, entries []entry) error {
	free := "unknown"
	if n, err := as.cfg.FreeSpace(as.cfg.Dir); err == nil {
		free = humanize.IBytes(n)
	}
	return noRoomError{fmt.Sprintf("no room for the package in %s (--access-dir, where every package is written first): "+
		"its files come to %s, %s is free; free some space there or give --access-dir a larger folder, "+
		"then ingestq access requeue %s", as.cfg.Dir, humanize.IBytes(uint64(filesSize(entries))), free, a.Ref())}
}

// filesSize is the recorded size of entries' files together.
func filesSize(entries []entry) int64 {
	var n int64
	for _, e := range entries {
		n += e.file.Size
	}
	return n
}

// writeFile writes the package to path (replacing a partial one a killed
// try left), synced, and returns its size and SHA-256.
func writeFile(ctx context.Context, path string, t queue.AccessToken, o storage.Stored, entries []entry) (int64, string, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	count := &counter{}
	// The disk's writes start while the package is being made (decision 221).
	buf := bufio.NewWriterSize(io.MultiWriter(f, durable.NewWriteback(f, 0), h, count), 256<<10)
	if err := writePackage(ctx, buf, t.Format, t.ARK, o, entries); err != nil {
		return 0, "", err
	}
	if err := buf.Flush(); err != nil {
		return 0, "", err
	}
	if err := f.Sync(); err != nil {
		return 0, "", err
	}
	return count.n, hex.EncodeToString(h.Sum(nil)), f.Close()
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
