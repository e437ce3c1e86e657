package handlers

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// estimate sums the sizes of a job's files into space_needed (the
// manifest's size, else a HEAD) and gives big jobs the profile's later
// priority. It never fails: a size it cannot learn makes the estimate 0
// ("unknown"), and Provisioning treats that with care. A busy server of
// the job's object manifest is waited for (stepFiles), and fails the job
// past --fetch-busy-limit, as Downloading would.
func (p *Pipeline) estimate(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	prof, err := p.jobProfile(j)
	if err != nil {
		return reactor.Result{}, err
	}
	var total int64
	files, wait, err := p.stepFiles(ctx, s, prof)
	if wait != nil {
		return *wait, err
	}
	p.endWaits(j.ID) // Downloading's busy clock starts again
	if err != nil {
		if ctx.Err() != nil {
			return reactor.Result{}, ctx.Err()
		}
		p.log.Warn("estimating: files not known; estimate 0", "job", j.ID, "err", err)
	} else {
		total = p.sizes(ctx, prof.Name, files)
	}
	prio := prof.PriorityFor(total, j.Priority)
	return reactor.Result{
		Change: queue.JobChange{SpaceNeeded: &total, Priority: &prio},
		Attrs:  map[string]any{"space_needed": total, "files": len(files)},
	}, nil
}

// sizes is the sum of the files' sizes, or 0 when one of them is unknown.
func (p *Pipeline) sizes(ctx context.Context, profName string, files []file) int64 {
	prof, _ := p.cfg.Profiles.Get(profName)
	var (
		mu      sync.Mutex
		total   int64 // of the HEADs, under mu
		known   int64 // the manifest's sizes
		unknown bool
	)
	g := errgroup.Group{}
	g.SetLimit(p.cfg.PerJob * 2)
	for _, f := range files {
		if f.Want.Size >= 0 {
			known += f.Want.Size
			continue
		}
		g.Go(func() error {
			n, _ := p.client(prof).Head(ctx, f.URL)
			mu.Lock()
			defer mu.Unlock()
			if n < 0 {
				unknown = true
			} else {
				total += n
			}
			return nil
		})
	}
	_ = g.Wait()
	if unknown {
		return 0
	}
	return total + known
}

// provision lets a job on when the working storage has room for it: its
// estimate plus the margin free, and the fill ratio after it at most
// MaxFill. Otherwise it waits and is tested again after ProvisionWait.
func (p *Pipeline) provision(ctx context.Context, s *reactor.Step) (reactor.Result, error) {
	j := s.Job
	free, total, err := p.cfg.Space(p.work)
	if err != nil {
		return reactor.Result{}, err // retryable: a file system hiccup
	}
	need := uint64(max(j.SpaceNeeded, 0))
	if fill, fits := p.roomFor(need, free, total); !fits {
		p.log.Info("provisioning: not enough room; job waits", "job", j.ID, "need", need, "free", free,
			"fill_after", fill, "max_fill", p.cfg.MaxFill, "retest_in", p.cfg.ProvisionWait)
		return p.waitForRoom(ctx, s, waitingForRoom(need, uint64(p.cfg.Margin), free, fill, p.cfg.MaxFill)), nil
	}
	return reactor.Result{Attrs: map[string]any{"free": free}}, nil
}

// roomFor is the room rule: need bytes more fit the working storage (free
// bytes of total) when need and --space-margin are free and the fill
// ratio after them is at most --max-fill. Provisioning admits a job by it,
// and Downloading unpacks a zip by it (roomToUnpack).
func (p *Pipeline) roomFor(need, free, total uint64) (fill float64, fits bool) {
	used := total - min(free, total)
	fill = 1.0
	if total > 0 {
		fill = float64(used+need) / float64(total)
	}
	return fill, need+uint64(p.cfg.Margin) <= free && fill <= p.cfg.MaxFill
}

// waitForRoom is the step's Result while the room rule holds its job back:
// it stays in its state and is tried again after --provision-wait, msg
// (waitingForRoom's) saying why.
func (p *Pipeline) waitForRoom(ctx context.Context, s *reactor.Step, msg string) reactor.Result {
	p.sayWhyItWaits(ctx, s, msg, nil)
	return reactor.Result{Wait: p.cfg.ProvisionWait}
}

// fileBlock is what a file's last block may take beyond its bytes: 4 KiB
// on ext4, XFS and tmpfs as usually made.
const fileBlock = 4 << 10

// errNoRoomYet is a zip that fits the working storage but not the room
// left in it now: its job waits in Downloading, as Provisioning holds a
// job, why (waitingForRoom's words) its message.
type errNoRoomYet struct{ why string }

func (e errNoRoomYet) Error() string { return e.why }

// roomToUnpack is a zip's check by the room rule (roomFor), before any
// byte is written, its entries' headers' total (and a block for each
// file's end) as the bytes it needs, and the release of the room it found,
// once unpacked. Unpacked unchecked, it filled the disk, and the host's
// other jobs found it full, until it failed for taking more than its
// estimate (overran). A zip that never fits, on an empty disk, fails; one
// that fits once other jobs are done waits (errNoRoomYet). Room counts:
//   - as taken, the headers' total of the zips being unpacked here at once
//     (what they wrote already is counted twice: a zip waits rather than
//     fill the disk with another; each saw the same free space, and both
//     passed);
//   - as free, what an earlier run unpacked into dest (a crash cut it
//     short), which is replaced, but only a file of one link: one Storing
//     linked into the primary storage keeps its blocks there.
//
// When the room cannot be told, the zip is not refused: a full disk still
// stops it as it is unpacked.
func (p *Pipeline) roomToUnpack(j *queue.Job, dest string) (fits func(unpacked uint64, files int) error, release func()) {
	var reserved uint64
	fits = func(unpacked uint64, files int) error {
		// Each file's last block is counted whole: 70,000 files of 100
		// bytes take 280 MB of 4 KiB blocks, not 7 MB.
		need := unpacked + uint64(files)*fileBlock
		earlier, err := freedByReplacing(dest)
		p.unpackMu.Lock()
		defer p.unpackMu.Unlock()
		free, total, spaceErr := p.cfg.Space(p.work)
		if err = cmp.Or(spaceErr, err); err != nil {
			p.log.Warn("downloading: the working storage's room is unknown; a zip is unpacked unchecked", "job", j.ID, "err", err)
			return nil
		}
		free += uint64(earlier)
		free -= min(free, p.unpacking)
		margin := uint64(p.cfg.Margin)
		size := fmt.Sprintf("unpacks to %d bytes in %d files, as its entries' headers say (%d bytes of disk, each file's last %d-byte block whole)",
			unpacked, files, need, fileBlock)
		if _, ever := p.roomFor(need, total, total); !ever {
			return fmt.Errorf("%s, more than the working storage can ever give it (%d bytes in all, --space-margin %d bytes, "+
				"--max-fill %.0f%%); nothing was unpacked", size, total, margin, p.cfg.MaxFill*100)
		}
		if fill, fits := p.roomFor(need, free, total); !fits {
			return errNoRoomYet{fmt.Sprintf("%s; container %s %s", waitingForRoom(need, margin, free, fill, p.cfg.MaxFill),
				redact.Location(j.Config.PayloadURL), size)}
		}
		reserved = need
		p.unpacking += reserved
		return nil
	}
	release = func() {
		p.unpackMu.Lock()
		defer p.unpackMu.Unlock()
		p.unpacking -= reserved
	}
	return fits, release
}

// waitingForRoom is a job's message while the room rule holds it back
// (Provisioning, or Downloading its zip: roomToUnpack): the limit it is
// held by first, with the setting that draws it (`ingestq ls` shows a
// message's first 48 characters), then the other numbers.
func waitingForRoom(need, margin, free uint64, fill, maxFill float64) string {
	room := fmt.Sprintf("%d MiB free, needs %d MiB + %d MiB margin", free>>20, need>>20, margin>>20)
	full := fmt.Sprintf("%.0f%%", fill*100)
	if fill > maxFill && math.RoundToEven(fill*100) <= math.RoundToEven(maxFill*100) {
		// 80.3 % past 80 %: "80% full" would read as within the limit.
		full = fmt.Sprintf("over %.0f%%", maxFill*100)
	}
	ratio := fmt.Sprintf("%s full, --max-fill %.0f%%", full, maxFill*100)
	if need+margin > free {
		return waitingPrefix + room + heldByMargin + ratio + " with the job)"
	}
	return waitingPrefix + ratio + " (with the job; " + room + ")"
}

// What RoomLimit reads of waitingForRoom's two forms.
const (
	waitingPrefix = "waiting for room: "
	heldByMargin  = " (--space-margin; "
)

// RoomLimit is the setting that holds a job back, read from its message:
// "--max-fill" or "--space-margin" while the room rule holds it,
// "" for any other message. submit --wait says what to do by it.
func RoomLimit(message string) string {
	switch {
	case !strings.HasPrefix(message, waitingPrefix):
		return ""
	case strings.Contains(message, heldByMargin):
		return "--space-margin"
	}
	return "--max-fill"
}

// DiskSpace is the free bytes of dir's file system (for unprivileged
// users) and its total as df counts it: what is used plus that free part.
// Blocks reserved for root are in neither: counted in the total as used,
// they made a file system with a large reserve (measured: df 41 % used,
// blocks 79 % "used") look full to provisioning, and every job waited.
// The demo asks it too, before it starts a daemon.
func DiskSpace(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	used := st.Blocks - min(st.Bfree, st.Blocks)
	return st.Bavail * uint64(st.Bsize), (used + st.Bavail) * uint64(st.Bsize), nil
}
