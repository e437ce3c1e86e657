package events

// Events kept at a stop. Close writes the events the stream has not
// acknowledged to the data folder (keptFileName), and the next start of a
// daemon on that folder publishes them first, under their own IDs, through
// the ordinary send and resend path: a daemon cut off from its stream's
// quorum moves jobs with none of their moves recorded, and counting those
// lost at an ordinary stop lost earlier moves for good (decision 781). One
// daemon holds a data folder at a time (serve.lock), so one bus reads and
// writes the file. While it runs the file holds the events parked
// (keptwriter.go): a process killed outright loses only what it held in
// memory and had not written (events within their minute of resends, and
// those parked since the writer's last write, keptRest).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/durable"
)

// keptFileName is the file, in the data folder, of the events kept at the
// last stop, and while the bus runs of those parked (keptwriter.go): a
// header line (keptHeader), then each event as published, one JSON object
// a line.
const keptFileName = "events-kept.jsonl"

// keptMaxBytes bounds the file (Config.keptMax): events beyond it are
// counted lost. It bounds the parked events too (parked.go); besides them
// what waits in memory is the queue (65,536), nats.go's 4,000 unanswered
// publishes, and what waits out a resend pause; a full queue of job moves
// (about 250 bytes each) is 16 MB.
const keptMaxBytes = 64 << 20

// keptLineMax bounds one line read back: far above any event.
const keptLineMax = lookupMaxBytes

// keptHeader, the file's first line, names the queue and stream the
// events are for: a data folder reused for another queue never publishes
// the first queue's events into the second's stream.
type keptHeader struct {
	Format  int       `json:"ingestq_kept_events"` // 1
	Queue   string    `json:"queue"`               // Config.Queue
	QueueAt string    `json:"queue_at,omitempty"`  // Config.QueueAt, for people
	Stream  string    `json:"stream"`
	Host    string    `json:"host"`
	Written time.Time `json:"written"`
	Events  int       `json:"events"`
}

// keptHeaderKey marks a kept event's copy in the stream: Replay leaves it
// out when the stream holds the event already (a publish stored whose
// acknowledgement was lost, sent again after the duplicate window).
const keptHeaderKey = "Ingestq-Kept"

// keptPath is the file of kept events, "" without a data folder.
func (c Config) keptPath() string {
	if c.DataDir == "" {
		return ""
	}
	return filepath.Join(c.DataDir, keptFileName)
}

// readKept reads the events kept at the last stop, for New to queue first.
// A file of another queue or stream, or whose header is unreadable, is
// moved aside whole; a bad line is left out and said, naming the file and
// line (the first ten), the file moved aside and the good lines written
// anew. Nothing here fails the start.
func (b *Bus) readKept() []outMsg {
	path := b.cfg.keptPath()
	if path == "" {
		return nil
	}
	b.removeKeptLeftovers(path)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		b.log.Warn("events: cannot read the events kept at the last stop; they are not published", "file", path, "err", err)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, keptLineMax)
	var h keptHeader
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &h) != nil || h.Format != 1 {
		b.keptAside(path, "bad", "events: "+path+" line 1: not the header of events kept at a stop; none of its events is published")
		return nil
	}
	if h.Queue != b.cfg.Queue || h.Stream != b.cfg.Stream {
		b.keptAside(path, "other-queue", fmt.Sprintf("events: %s holds events of another queue or stream (queue %s, its /batches made in %q, stream %s), "+
			"not this daemon's (queue %s, its /batches made in %q, stream %s): they are not published into this one's",
			path, h.QueueAt, h.Queue, h.Stream, b.cfg.QueueAt, b.cfg.Queue, b.cfg.Stream))
		return nil
	}
	var kept []outMsg
	bad := 0
	for line := 2; sc.Scan(); line++ {
		m, err := keptEvent(sc.Bytes())
		if err == nil && !b.keptFile.add(m, true) {
			continue // one copy is enough: the stream keeps one
		}
		if err != nil {
			if bad++; bad <= 10 {
				b.log.Warn(fmt.Sprintf("events: %s line %d: %v; left out", path, line, err))
			}
			continue
		}
		kept = append(kept, m)
	}
	if err := sc.Err(); err != nil {
		bad++
		b.log.Warn(fmt.Sprintf("events: %s after line %d: %v; the rest left out", path, len(kept)+bad+1, err))
	}
	if bad > 0 {
		b.keptAside(path, "bad", fmt.Sprintf("events: %s: %d bad lines left out, %d events kept", path, bad, len(kept)))
		if err := b.writeKept(kept); err != nil {
			b.log.Warn("events: cannot write the good events anew; they are published, but a process killed before "+
				"the stream takes them loses them", "file", path, "err", err)
		}
	}
	b.keptTotal = int64(len(kept))
	b.keptCount.Store(b.keptTotal)
	return kept
}

// removeKeptLeftovers removes the temporary files of writes of the file at
// path that a kill cut short (durable.WriteFile's ".events-kept.jsonl.*",
// up to keptMaxBytes each, never read): the file itself is whole, the one
// before such a write. One daemon holds the folder (serve.lock).
func (b *Bus) removeKeptLeftovers(path string) {
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".*"))
	for _, f := range left {
		if err := os.Remove(f); err != nil {
			b.log.Warn("events: cannot remove a write of the kept events cut short", "file", f, "err", err)
		}
	}
}

// keptEvent is one line of the file as the message that publishes it.
func keptEvent(line []byte) (outMsg, error) {
	e, err := decode(line)
	switch {
	case err != nil:
		return outMsg{}, fmt.Errorf("not an event: %w", err)
	case e.ID == "":
		return outMsg{}, errors.New("an event without an id")
	}
	return outMsg{subject: e.Subject(), id: e.ID, data: bytes.Clone(line), kept: true}, nil
}

// keptAside renames the file at path to path.WHY-TIME, saying so after
// said.
func (b *Bus) keptAside(path, why, said string) {
	aside := path + "." + why + "-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		b.log.Warn(said+"; it could not be moved aside", "err", err)
		return
	}
	b.log.Warn(said + "; moved to " + aside)
}

// keptDone ends the way of event id, published or lost, in the file: the
// writer writes it anew without it. Once the last event kept at the last
// stop has gone, the writer says what the start published. Not at a park:
// a kept event parked stays in the file until it is published.
func (b *Bus) keptDone(id string, published bool) {
	was, fromStart := b.keptFile.remove(id)
	if !was {
		return
	}
	if fromStart {
		if published {
			b.keptPublished.Add(1)
		}
		if b.keptCount.Add(-1) == 0 {
			b.keptSay.Store(true) // before the write asked below, which then no longer holds them
		}
	}
	b.keptWriteSoon()
}

// sayKeptPublished says what became of the events kept at the last stop,
// the last of them gone.
func (b *Bus) sayKeptPublished() {
	n, superseded, total := b.keptPublished.Load(), b.keptSuperseded.Load(), b.keptTotal
	switch {
	case n+superseded < total:
		b.log.Warn(fmt.Sprintf("events: published %d of the %d events kept at the last stop; the others were counted lost "+
			"(refused, or past the cap of events held until the stream takes them)", n, total), "superseded", superseded)
	case superseded > 0:
		b.log.Info(fmt.Sprintf("events: published %d events kept at the last stop, and left out %d progress events "+
			"superseded by a later one of their job", n, superseded))
	default:
		b.log.Info(fmt.Sprintf("events: published %d events kept at the last stop", n))
	}
}

// keepAtClose keeps the events the stream has not acknowledged, counting
// lost, once, what cannot be kept, and superseded each progress event
// followed by a later one of its job (parked.go's rule, over all of them).
func (b *Bus) keepAtClose() {
	ms, superseded := latestProgress(b.unacknowledged())
	b.superseded.Add(uint64(superseded))
	n := b.keepUnacknowledged(ms)
	b.kept.Add(uint64(len(ms) - n))
	if n > 0 {
		b.lost.Add(uint64(n))
		b.log.Warn("events: closing with unacknowledged events", "lost", n, "lost_total", b.lost.Load())
	}
}

// keepUnacknowledged writes ms, the events the stream has not acknowledged
// at Close, to the file (or removes it when there are none), and returns
// how many it could not keep: over the cap, or all when the file
// cannot be written.
func (b *Bus) keepUnacknowledged(ms []outMsg) int {
	path := b.cfg.keptPath()
	if path == "" {
		return len(ms)
	}
	keep := withinCap(ms, b.cfg.keptMax)
	if err := b.writeKept(ms[:keep]); err != nil {
		b.log.Warn("events: cannot keep the unacknowledged events", "file", path, "err", err)
		return len(ms)
	}
	if keep > 0 {
		b.log.Warn(fmt.Sprintf("events: kept %d unacknowledged events in %s; the next start publishes them", keep, path))
	}
	if keep < len(ms) {
		b.log.Warn(fmt.Sprintf("events: %d more unacknowledged events did not fit in %s (at most %s)",
			len(ms)-keep, path, sizeText(b.cfg.keptMax)))
	}
	return len(ms) - keep
}

// withinCap is how many of ms, the first, fit in max bytes of the file.
func withinCap(ms []outMsg, max int) int {
	size := 0
	for i, m := range ms {
		if size += keptSize(m); size > max {
			return i
		}
	}
	return len(ms)
}

// keptSize is m's bytes in the file (its line), which the cap counts: of
// the events kept, and of those parked (parked.go).
func keptSize(m outMsg) int { return len(m.data) + 1 }

// latestProgress leaves out of ms, in the order of their times, each
// progress event followed by a later one of its job, and says how many.
func latestProgress(ms []outMsg) ([]outMsg, int) {
	last := map[string]int{}
	for i, m := range ms {
		if isProgress(m.subject) {
			last[m.subject] = i
		}
	}
	out := make([]outMsg, 0, len(ms))
	for i, m := range ms {
		if j, progress := last[m.subject]; !progress || j == i {
			out = append(out, m)
		}
	}
	return out, len(ms) - len(out)
}

// writeKept makes the file hold ms, whole or not at all (durable.WriteFile:
// a temporary file of mode 0600, synced, renamed over it). No events: no file.
func (b *Bus) writeKept(ms []outMsg) error {
	path := b.cfg.keptPath()
	if len(ms) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	head, err := json.Marshal(keptHeader{Format: 1, Queue: b.cfg.Queue, QueueAt: b.cfg.QueueAt, Stream: b.cfg.Stream,
		Host: b.cfg.Host, Written: time.Now().UTC(), Events: len(ms)})
	if err != nil {
		return err
	}
	// Sized at once: grown by doubling, a 64 MiB file cost 128 MiB more of
	// garbage at each of the writer's writes.
	size := len(head) + 1
	for _, m := range ms {
		size += keptSize(m)
	}
	var buf bytes.Buffer
	buf.Grow(size)
	buf.Write(head)
	buf.WriteByte('\n')
	for _, m := range ms {
		buf.Write(m.data)
		buf.WriteByte('\n')
	}
	return durable.WriteFile(path, buf.Bytes()) // a temporary file of mode 0600
}

// unacknowledged gathers, at Close, the events the stream has not
// acknowledged (those sent and unanswered, those waiting to be sent again,
// those parked, those never sent) in the order of their times, as they
// were published. Their flights end; the waiters of those paused or never
// sent are told here, those of the flights by close (b.acks), those parked
// when parked. The flights go first: a flight that fails (its ack timeout)
// as Close gathers moves to b.pausing or b.parked, under the flights' lock,
// and nothing moves back once closed is set (the publisher, which sends
// parked events again, has ended); taken the other way round, such an
// event was in neither when each was taken.
func (b *Bus) unacknowledged() []outMsg {
	var out []outMsg
	for _, m := range b.flying.takeAll() {
		out = append(out, outMsg{subject: m.Subject, id: m.Header.Get(jetstream.MsgIDHeader), data: m.Data})
	}
	if b.cfg.keepTaking != nil {
		b.cfg.keepTaking()
	}
	out = append(out, b.pausingTaken()...)
	out = append(out, b.parkedTaken()...)
	for _, m := range b.unsent {
		closeAcked(m.acked)
		if m.resent {
			b.resolved(m.id)
		}
		out = append(out, outMsg{subject: m.subject, id: m.id, data: m.data})
	}
	times := make(map[string]time.Time, len(out))
	for _, m := range out {
		e, _ := decode(m.data)
		times[m.id] = e.Time
	}
	slices.SortStableFunc(out, func(a, b outMsg) int { return times[a.id].Compare(times[b.id]) })
	return out
}
