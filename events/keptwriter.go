package events

// The kept file while the bus runs. It holds the events kept at the last
// stop and those parked since (parked.go), each until it is acknowledged,
// counted lost, superseded or kept at Close: a process killed outright
// (SIGKILL, an OOM kill, the machine lost) while cut off from its stream's
// quorum leaves them in the file, and its next start sends them as it sends
// the events kept at a planned stop. One goroutine writes it (keptWriter),
// whole each time (durable.WriteFile: synced, renamed into place); a lost
// quorum parks events one by one at the pace they were published, so the
// changes during one write make one write after it.

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
)

// keptSet is what the file is to hold while the bus runs.
type keptSet struct {
	mu      sync.Mutex
	events  map[string]keptEntry // by event ID
	added   uint64               // events added so far: their order in the file
	changes uint64               // adds and removals so far: what a write is up to
	n       atomic.Int64         // len(events), read without the lock
}

type keptEntry struct {
	order     uint64
	data      []byte // its line, shared with the message that sends it
	fromStart bool   // read from the file at the start: counted for the start's line (keptDone)
}

// add adds m, unless it is there already (a kept event parked again);
// it tells whether it added it.
func (s *keptSet) add(m outMsg, fromStart bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.events[m.id]; ok {
		return false
	}
	if s.events == nil {
		s.events = map[string]keptEntry{}
	}
	s.added++
	s.changes++
	s.events[m.id] = keptEntry{order: s.added, data: m.data, fromStart: fromStart}
	s.n.Store(int64(len(s.events)))
	return true
}

// remove removes event id, and tells whether it was there and whether it
// was read from the file at the start.
func (s *keptSet) remove(id string) (was, fromStart bool) {
	if s.n.Load() == 0 {
		return false, false // the common case: every acknowledgement asks
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.events[id]
	if !ok {
		return false, false
	}
	delete(s.events, id)
	s.changes++
	s.n.Store(int64(len(s.events)))
	return true, e.fromStart
}

// fromStart tells whether event id is there, read from the file at the
// start.
func (s *keptSet) fromStart(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events[id].fromStart
}

// all returns the events in the order added (their lines only), and the
// changes they are up to.
func (s *keptSet) all() ([]outMsg, uint64) {
	s.mu.Lock()
	es := make([]keptEntry, 0, len(s.events))
	for _, e := range s.events {
		es = append(es, e)
	}
	changes := s.changes
	s.mu.Unlock()
	slices.SortFunc(es, func(a, b keptEntry) int { return cmp.Compare(a.order, b.order) })
	out := make([]outMsg, len(es))
	for i, e := range es {
		out[i] = outMsg{data: e.data}
	}
	return out, changes
}

// version is the changes made so far.
func (s *keptSet) version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes
}

// keptWriteSoon asks keptWriter to write the file anew: the events it is
// to hold changed. One signal however many changes come.
func (b *Bus) keptWriteSoon() {
	if b.cfg.keptPath() == "" {
		return
	}
	select {
	case b.keptChanged <- struct{}{}:
	default:
	}
}

// keptWriteShare is the share of its time the writer may spend writing:
// after a write that took d it rests d/keptWriteShare - d, at most
// keptWriteRestMax, so that parks trickling in while 64 MiB are held do
// not rewrite 64 MiB back to back. Small files are written at once. A
// write that failed is tried again, changes or not, after at least
// keptWriteRetry, doubled at each failure up to keptWriteRestMax.
//
// keptWriteBytesPerSecond bounds the bytes written over time as well: a
// split that goes on changing a full file (each job's newer progress
// event replacing its older) rewrote 64 MiB every 2.6 s by the share
// alone, 93 GB an hour of a disk's wear. At 1 MiB/s a file of n MiB is
// written at most every n seconds, up to keptWriteBytesRestMax: a full
// one once a minute (3.8 GB an hour), one of a few hundred events at once.
// What a kill loses is what was parked during the last rest.
const (
	keptWriteShare          = 0.1
	keptWriteRestMax        = 10 * time.Second
	keptWriteRetry          = 500 * time.Millisecond
	keptWriteBytesPerSecond = 1 << 20
	keptWriteBytesRestMax   = time.Minute
)

// keptRest is how long the writer rests after a write of size bytes that
// took took.
func keptRest(took time.Duration, size int) time.Duration {
	byShare := min(time.Duration(float64(took)/keptWriteShare)-took, keptWriteRestMax)
	byBytes := min(time.Duration(float64(size)/keptWriteBytesPerSecond*float64(time.Second))-took, keptWriteBytesRestMax)
	return max(byShare, byBytes)
}

// keptWriter writes the file anew at each change asked, until Close
// begins; Close waits for it to end, then writes the file itself with
// everything unacknowledged.
func (b *Bus) keptWriter() {
	defer close(b.keptWriterDone)
	rest := time.NewTimer(0)
	defer rest.Stop()
	failures := 0
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-rest.C:
		}
		select {
		case <-b.ctx.Done():
			return
		case <-b.keptChanged:
			if b.ctx.Err() != nil {
				return // Close has begun (a select picks either of two ready): the file is Close's to write
			}
			start := time.Now()
			size, ok := b.writeHeld(failures)
			wait := keptRest(time.Since(start), size)
			if ok {
				failures = 0
			} else {
				// A folder full or read-only for a while: the events held
				// reach the file once it takes them again, though nothing
				// changes meanwhile (a batch stuck through the split).
				failures++
				wait = max(wait, backoff.Delay(keptWriteRetry, keptWriteRestMax, failures))
				b.keptWriteSoon()
			}
			rest.Reset(wait)
		}
	}
}

// writeHeld makes the file hold the events it is to hold now, within the
// cap (the oldest first), or removes it when there are none, and tells
// the bytes it was to hold and whether it did; then, if the last of the
// events kept at the last stop has gone since the write before, says so
// (after the write, which no longer holds them). failed is how many
// writes before it failed in a row.
func (b *Bus) writeHeld(failed int) (size int, ok bool) {
	say := b.keptSay.Swap(false)
	ms, changes := b.keptFile.all()
	keep := withinCap(ms, b.cfg.keptMax)
	err := b.writeKept(ms[:keep])
	if err != nil {
		if b.keptWarn.Allow() {
			b.log.Warn("events: cannot write the file of the events held for the next start; they are sent when the stream "+
				"takes events, or kept at a stop, but until a write succeeds a process killed loses those held since, and "+
				"publishes again those sent since (replays show each once); tried again", "file", b.cfg.keptPath(), "err", err)
		}
	} else {
		if failed > 0 {
			b.log.Info("events: the file of the events held for the next start is written again", "file", b.cfg.keptPath(),
				"events", keep, "failed_writes", failed)
		}
		b.keptWrites.Add(1)
		b.keptWritten.Store(changes)
		if keep < len(ms) && b.keptWarn.Allow() {
			b.log.Warn("events: the events held until the stream takes them pass the kept file's cap ("+sizeText(b.cfg.keptMax)+
				"); those past it are sent when it does, or kept at a stop if they fit, but a process killed loses them",
				"file", b.cfg.keptPath(), "held", len(ms), "written", keep)
		}
	}
	if say {
		b.sayKeptPublished()
	}
	for _, m := range ms[:keep] {
		size += keptSize(m)
	}
	return size, err == nil
}
