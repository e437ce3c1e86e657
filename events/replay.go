package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/internal/redact"
)

// Filter selects the recorded events Replay delivers.
type Filter struct {
	Since    time.Time // only events whose Time is not before Since; zero = from the start of the stream
	BatchID  string    // only events whose BatchID matches
	JobID    string    // only events whose JobID matches
	AccessID string    // only events whose AccessID matches: queue/qid…, or a bare qid… of either queue
	// Subject is a NATS subject filter within the stream. Default: the
	// subjects that can carry the job or access request named (subjects),
	// else SubjectAll.
	Subject string
	// Queue is the identity of the queue whose events are wanted
	// (Config.Queue): a stream that records another queue's is refused
	// (ErrOtherQueue). "", or a stream that names no queue, reads all.
	Queue string
}

// clockSkew is how much earlier than Filter.Since the server starts
// reading: the server files messages by its own clock, events carry the
// publisher's, so the exact cut is made on Event.Time.
const clockSkew = time.Minute

// replayIdle is how long Replay waits for the next message before it asks
// the server whether anything is still pending (messages can expire or be
// purged while a replay runs). It must be longer than twice replayBeat:
// nats.go checks for missed heartbeats only within one wait for the next
// message, and a shorter wait would never see one.
const replayIdle = 5 * time.Second

// replayBeat is the heartbeat Replay asks of the server. Two missed, and
// the client makes its consumer again from the last message it had: a
// pull request lost while a cluster's consumer was still being placed
// (seen on a loaded machine: the consumer had 12 pending and no waiting
// request for 30 s) costs two seconds rather than the replay.
const replayBeat = time.Second

// replayStall is how long Replay goes on without a message while the
// server says some are still pending (or cannot say), or asks again a
// stream that does not answer its start, before it gives up with an error:
// a consumer stuck in a cluster that is re-forming must not hang `events
// replay` for ever.
const replayStall = 30 * time.Second

// match reports whether e passes the filter's client-side tests.
func (f Filter) match(e Event) bool {
	return (f.BatchID == "" || e.BatchID == f.BatchID) &&
		(f.JobID == "" || e.JobID == f.JobID) &&
		(f.AccessID == "" || e.AccessID == f.AccessID || strings.HasSuffix(e.AccessID, "/"+f.AccessID)) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since))
}

// replayAsk bounds each JetStream request of a replay's start (the
// stream's info, the consumer's creation) and of its checks: one sent while
// a NATS cluster elects its meta leader, as just after a split heals, gets
// no answer at all, and waited out the caller's whole deadline (a minute, in
// a test; the next one was answered in 10 ms). The jetstream package's own
// bound, for a context without a deadline.
const replayAsk = 5 * time.Second

// Replay calls fn, in stream order, for each recorded event that passes f,
// reading stream (DefaultStream when "") through an ordered consumer on nc
// for each of f's subjects (Filter.subjects), deleted as its pass ends
// (delivery.drop). It stops once it has delivered everything that was in
// the stream when it began, as the stream's leader holds it
// (leaderHolds), and returns fn's first error, ctx's error, an error
// saying the replay is incomplete (replayStall), or nil. An empty stream
// returns nil at once; a missing stream is an error naming it. A stream
// that does not answer at the start (Unavailable: a NATS cluster electing
// a leader or re-forming) is asked again for up to replayStall, or until
// ctx ends, then is an error saying so.
func Replay(ctx context.Context, nc *nats.Conn, stream string, f Filter, fn func(Event) error, opts ...ReplayOption) error {
	stream = cmp.Or(stream, DefaultStream)
	var o replayOptions
	for _, opt := range opts {
		opt(&o)
	}
	// The operators' actions (the subjects after the first) are few: they
	// are read first, each on a consumer of its own, and placed among the
	// first subject's events by their sequence. One consumer of several
	// subjects cost the server a search of each block's subjects for each
	// message (decision 1002).
	subjects := f.subjects()
	var actions []sequenced
	var cut replayCut
	for _, subject := range subjects[1:] {
		err := replaySubject(ctx, nc, stream, f, subject, &cut, &o, func(seq uint64, e Event) error {
			actions = append(actions, sequenced{seq, e})
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.SortStableFunc(actions, func(a, b sequenced) int { return cmp.Compare(a.seq, b.seq) })
	err := replaySubject(ctx, nc, stream, f, subjects[0], &cut, &o, func(seq uint64, e Event) error {
		for ; len(actions) > 0 && actions[0].seq < seq; actions = actions[1:] {
			if err := fn(actions[0].e); err != nil {
				return err
			}
		}
		return fn(e)
	})
	for ; err == nil && len(actions) > 0; actions = actions[1:] {
		err = fn(actions[0].e)
	}
	return err
}

// sequenced is an event and its sequence in the stream.
type sequenced struct {
	seq uint64
	e   Event
}

// replayCut is the stream's last sequence when a replay began (known once
// its first pass has read the stream's state): every pass stops there.
type replayCut struct {
	last  uint64
	known bool
}

// replaySubject is one pass of Replay: fn is called, with its sequence,
// for each event of subject that passes f, up to cut.
func replaySubject(ctx context.Context, nc *nats.Conn, stream string, f Filter, subject string, cut *replayCut, o *replayOptions,
	fn func(seq uint64, e Event) error) error {
	began := time.Now()
	var d *delivery
	var err error
	for tries := 1; ; tries++ {
		if d, err = startReplay(ctx, nc, stream, f, subject, cut); err == nil || !Unavailable(nc, err) {
			break
		}
		if o.waiting != nil {
			o.waiting(err)
			o.waiting = nil // said once a replay
		}
		waited := time.Since(began)
		if waited >= replayStall || !backoff.Sleep(ctx, backoff.Delay(settlePoll, time.Second, tries)) {
			return fmt.Errorf("events: replay %s: the event stream did not answer for %v (a NATS cluster electing a leader or "+
				"re-forming?): %w", stream, waited.Round(time.Second), err)
		}
	}
	if err != nil || d == nil {
		return err // nil: nothing to deliver
	}
	d.fn = fn
	defer d.drop() // deferred calls run last first: after the Stops
	defer d.it.Stop()
	defer context.AfterFunc(ctx, d.it.Stop)()
	return d.run()
}

// ReplayOption changes how Replay goes about its replay.
type ReplayOption func(*replayOptions)

type replayOptions struct {
	waiting func(err error)
}

// WhenWaiting has Replay call said, with the stream's answer, as it begins
// to wait for a stream that does not answer: the caller says it waits.
func WhenWaiting(said func(err error)) ReplayOption {
	return func(o *replayOptions) { o.waiting = said }
}

// startReplay is one try at a pass's start: the stream found and checked,
// the consumer of subject made; nil when nothing is to be delivered. The
// first pass's start that succeeds takes the cut (a try again takes the
// stream's last sequence again).
func startReplay(ctx context.Context, nc *nats.Conn, stream string, f Filter, subject string, cut *replayCut) (_ *delivery, err error) {
	ask, cancel := context.WithTimeout(ctx, replayAsk)
	defer cancel()
	s, err := openStream(ask, nc, stream)
	if err != nil {
		return nil, err
	}
	if err := ofQueue(nc, s, f.Queue); err != nil {
		return nil, fmt.Errorf("events: replay: %w, not this one: read this queue's events from its own NATS", err)
	}
	state := s.CachedInfo().State
	last := state.LastSeq
	if cut.known {
		last = cut.last
	}
	defer func() {
		if err == nil {
			cut.last, cut.known = last, true
		}
	}()
	if state.Msgs == 0 {
		return nil, nil
	}
	// This queue's events start at from when the stream recorded another
	// queue's before (ownStream): the times of events cannot tell them
	// apart within the clock skew allowed.
	from := uint64(0)
	if meta := s.CachedInfo().Config.Metadata; f.Queue != "" && meta[metaQueue] == f.Queue {
		from, _ = strconv.ParseUint(meta[metaQueueFrom], 10, 64)
	}
	if from > last {
		return nil, nil
	}
	cons, err := s.OrderedConsumer(ask, f.consumerConfig(subject, from))
	if err != nil {
		return nil, fmt.Errorf("events: replay %s: %w", stream, err)
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(replayBeat), jetstream.PullExpiry(replayIdle))
	if err != nil {
		return nil, fmt.Errorf("events: replay %s: %w", stream, err)
	}
	d := &delivery{ctx: ctx, nc: nc, stream: stream, subject: subject, cons: cons, it: it, from: from, last: last, f: f}
	if info := cons.CachedInfo(); info != nil {
		d.at = info.Delivered.Stream // where the consumer starts, less one
		if info.NumPending == 0 && !d.leaderHolds() {
			it.Stop()
			d.drop()
			return nil, nil // nothing matches the subject filter and start
		}
	}
	return d, nil
}

// Unavailable tells whether err, from Replay on nc, is JetStream not
// answering for a while, as while a NATS cluster elects a leader or
// re-forms: Replay may be tried again. A server without JetStream (no
// responders for ever) and a refusal are not.
func Unavailable(nc *nats.Conn, err error) bool {
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return false
	}
	if js, _ := nc.ConnectedServerJetStream(); !js && nc.IsConnected() {
		return false // nothing will ever answer
	}
	return unavailable(err)
}

// CheckStream refuses stream (DefaultStream when "") on nc when it records
// the events of another queue than queue (Config.Queue), with an error
// wrapping ErrOtherQueue that says where that queue is. A stream of queue,
// one that names no queue, and a queue of "" pass; a missing stream is an
// error wrapping jetstream.ErrStreamNotFound. One stream-info request.
func CheckStream(ctx context.Context, nc *nats.Conn, stream, queue string) error {
	s, err := openStream(ctx, nc, cmp.Or(stream, DefaultStream))
	if err != nil {
		return err
	}
	return ofQueue(nc, s, queue)
}

// ofQueue refuses s, a stream on nc, when it records the events of another
// queue than queue: the one check of Replay and CheckStream.
func ofQueue(nc *nats.Conn, s jetstream.Stream, queue string) error {
	cfg := s.CachedInfo().Config
	other := cfg.Metadata[metaQueue]
	if queue == "" || other == "" || other == queue {
		return nil
	}
	return fmt.Errorf("stream %s on NATS at %s: %w (%s; its /batches made in %s)",
		cfg.Name, redact.Location(nc.ConnectedUrl()), ErrOtherQueue, cfg.Metadata[metaQueueAt], other)
}

// openStream finds the stream, with an error naming it when it is missing.
func openStream(ctx context.Context, nc *nats.Conn, stream string) (jetstream.Stream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("events: replay: %w", err)
	}
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("events: replay: no stream %q: %w", stream, err)
	}
	if err != nil {
		return nil, fmt.Errorf("events: replay: stream %q: %w", stream, err)
	}
	return s, nil
}

// adminSubjects are the operators' actions: an action names its job, batch
// or request in the event only (Event.Subject: ingestq.admin.<action>).
const adminSubjects = "ingestq.admin.>"

// subjects are what the server reads for f, the one that holds most of its
// events first: f.Subject when set; else, when f names a job or an access
// request, the subjects Event.Subject gives the events that can carry it;
// else SubjectAll. A job's are its moves and its progress
// (ingestq.job.<to>.<jid>, ingestq.job.progress.<jid>) and the operators'
// actions; a request's its moves (ingestq.access.<to>.<queue>/<qid>, any
// queue's for a bare qid) and the operators' actions. A job's timeline
// thus reads its own events and the operators' actions, not the whole
// queue's since the job was made (decision 1001). A batch's jobs'
// subjects do not name it: reading all jobs' subjects rather than the
// whole stream left out little and cost the server more per message
// (1003). match stays the final check: a token can stand for two
// identifiers ("jid.1", "jid_1").
func (f Filter) subjects() []string {
	switch {
	case f.Subject != "":
		return []string{f.Subject}
	case f.JobID != "" && sameOnTheWire(f.JobID):
		return []string{"ingestq.job.*." + token(f.JobID), adminSubjects}
	case f.AccessID != "" && !strings.Contains(f.AccessID, "/"):
		return []string{"ingestq.access.>", adminSubjects}
	case f.AccessID != "" && sameOnTheWire(f.AccessID):
		return []string{"ingestq.access.*." + token(f.AccessID), adminSubjects}
	}
	return []string{SubjectAll}
}

// sameOnTheWire tells whether id's events are on subjects of id's token: an
// event's JSON turns invalid UTF-8 in an identifier into U+FFFD while its
// subject keeps the bytes, so a U+FFFD in id may stand for any of them.
func sameOnTheWire(id string) bool { return !strings.ContainsRune(id, utf8.RuneError) }

// consumerConfig has the server deliver subject, from the start (or
// sequence from, when not 0) or from a little before f.Since;
// delivery.take leaves out what comes before from.
func (f Filter) consumerConfig(subject string, from uint64) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	switch {
	case !f.Since.IsZero():
		start := f.Since.Add(-clockSkew)
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &start
	case from > 0:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from
	}
	return cfg
}

// delivery is one pass's delivery of its consumer's messages (replaySubject).
type delivery struct {
	ctx     context.Context
	nc      *nats.Conn
	stream  string
	subject string // the consumer's
	cons    jetstream.Consumer
	it      jetstream.MessagesContext
	from    uint64 // the first sequence of the queue's events (0: any)
	last    uint64 // the stream's last sequence when the replay began
	at      uint64 // the last sequence the consumer delivered
	f       Filter
	fn      func(seq uint64, e Event) error
}

// run hands fn the matching events, until the message that was last when
// the replay began, or until nothing more is pending and the stream's
// leader holds nothing more either (leaderHolds).
func (d *delivery) run() error {
	idle := time.Duration(0)
	for {
		msg, err := d.it.Next(jetstream.NextMaxWait(replayIdle))
		if errors.Is(err, nats.ErrTimeout) {
			if d.drained() {
				return nil
			}
			if idle += replayIdle; idle >= replayStall {
				return fmt.Errorf("events: replay %s: nothing delivered for %v though the stream holds events after sequence %d, up to %d "+
					"(a NATS server still catching up, or the cluster re-forming?): the replay is incomplete; try again", d.stream, idle, d.at, d.last)
			}
			continue
		}
		idle = 0
		if err != nil {
			if d.ctx.Err() != nil {
				return d.ctx.Err()
			}
			return fmt.Errorf("events: replay %s: %w", d.stream, err)
		}
		if done, err := d.take(msg); done || err != nil {
			return err
		}
	}
}

// drop deletes the pass's consumer, its messages stopped: an ordered
// consumer stays on the server for jetstream's 5 minutes after its last
// read, and a job's timeline makes one for each subject it reads. Not
// waited for: one the server does not delete (no meta leader) goes at its
// 5 minutes, as before.
func (d *delivery) drop() {
	if info := d.cons.CachedInfo(); info != nil {
		_ = d.nc.Publish("$JS.API.CONSUMER.DELETE."+d.stream+"."+info.Name, nil)
	}
}

// drained asks the consumer's server, then the stream's leader, whether
// anything is still pending: what was pending may have expired or been
// purged while the replay ran.
func (d *delivery) drained() bool {
	ask, cancel := context.WithTimeout(d.ctx, replayAsk)
	defer cancel()
	info, err := d.cons.Info(ask)
	return err == nil && info.NumPending == 0 && !d.leaderHolds()
}

// take calls fn with msg's event if it passes the filter; done once msg is
// the last message to deliver (or one recorded after the replay began).
func (d *delivery) take(msg jetstream.Msg) (done bool, err error) {
	meta, err := msg.Metadata()
	if err != nil {
		return true, fmt.Errorf("events: replay %s: %w", d.stream, err)
	}
	if meta.Sequence.Stream > d.last {
		return true, nil // recorded after the replay began
	}
	d.at = meta.Sequence.Stream
	kept := msg.Headers().Get(keptHeaderKey) != ""
	if e, err := decode(msg.Data()); err == nil && meta.Sequence.Stream >= d.from && d.f.match(e) &&
		!(kept && e.Kind != KindProgress && d.storedBefore(meta.Sequence.Stream, msg.Subject(), e.ID)) {
		e.late = kept
		if err := d.fn(meta.Sequence.Stream, e); err != nil {
			return true, err
		}
	}
	return meta.Sequence.Stream == d.last || meta.NumPending == 0 && !d.leaderHolds(), nil
}

// leaderHolds tells whether the stream's leader holds a message of the
// consumer's subject after d.at, up to d.last, or cannot say. The consumer
// is placed on any of the stream's servers, and one still catching up (a
// member just restarted) has fewer messages: its consumer then has none
// pending though the stream has more, and the replay would end short
// without a word. STREAM.MSG.GET is answered by the stream's leader only
// (a direct get, which AllowDirect lets any replica answer, would not do).
func (d *delivery) leaderHolds() bool {
	if d.at >= d.last {
		return false
	}
	seq, _, err := d.nextOn(d.at+1, d.subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	return err != nil || seq <= d.last
}

// storedBefore tells whether the stream holds event id on subject before
// sequence seq: a kept event's copy (keptHeaderKey) sent again after the
// duplicate window, of a publish that was stored though its
// acknowledgement was lost. A subject is one job's, batch's or request's
// entry into one state, so few messages are read. Unsure (no answer): no.
// Not asked of a progress event: its subject holds every progress event of
// its job (two a second of a download), each read one request, for each of
// the copies a split parks (parked.go); a progress copy shown twice says no
// more than the one before it.
func (d *delivery) storedBefore(seq uint64, subject, id string) bool {
	for at := max(d.from, 1); at < seq; {
		got, data, err := d.nextOn(at, subject)
		if err != nil || got >= seq {
			return false
		}
		if e, err := decode(data); err == nil && e.ID == id {
			return true
		}
		at = got + 1
	}
	return false
}

// nextOn asks the stream's leader for its first message on subject at or
// after sequence seq: its sequence and data, or jetstream.ErrMsgNotFound.
func (d *delivery) nextOn(seq uint64, subject string) (uint64, []byte, error) {
	req, err := json.Marshal(msgGetRequest{Seq: seq, NextBySubject: subject})
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(d.ctx, replayIdle)
	defer cancel()
	m, err := d.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+d.stream, req)
	if err != nil {
		return 0, nil, err
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	switch {
	case json.Unmarshal(m.Data, &resp) != nil:
		return 0, nil, fmt.Errorf("events: replay %s: an answer that is not a message", d.stream)
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return 0, nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return 0, nil, resp.Error
	case resp.Message == nil:
		return 0, nil, jetstream.ErrMsgNotFound
	}
	return resp.Message.Seq, resp.Message.Data, nil
}

// msgGetRequest asks the stream's leader for its first message of subject
// NextBySubject at or after sequence Seq.
type msgGetRequest struct {
	Seq           uint64 `json:"seq"`
	NextBySubject string `json:"next_by_subj"`
}

// Tail calls fn for each live event on subject (SubjectAll when "") until
// ctx is done, then returns nil. Messages that are not events are skipped.
// fn runs on the caller's goroutine and is never called after Tail returns.
func Tail(ctx context.Context, nc *nats.Conn, subject string, fn func(Event)) error {
	subject = cmp.Or(subject, SubjectAll)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return fmt.Errorf("events: tail %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	return deliver(ctx, sub, func(e Event) error { fn(e); return nil })
}

// deliver calls fn for each event sub receives until ctx is done (nil) or
// fn fails (its error). Messages that are not events are skipped, and so
// are those a slow consumer lost.
func deliver(ctx context.Context, sub *nats.Subscription, fn func(Event) error) error {
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, nats.ErrSlowConsumer) {
			continue // some were dropped; go on with the rest
		}
		if err != nil {
			return fmt.Errorf("events: tail %s: %w", sub.Subject, err)
		}
		if e, err := decode(m.Data); err == nil {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}
