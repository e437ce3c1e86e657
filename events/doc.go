// Package events is ingestq's news channel: the event envelope and its
// NATS subjects, the bus that publishes events (an embedded nats-server by
// default, an existing NATS cluster by URL), and the JetStream stream that
// records every event so that an operator can replay what happened.
//
// # Subjects
//
//	ingestq.job.<state>.<jid>       a job entered <state> (lower case)
//	ingestq.job.progress.<jid>      progress of a job's current step
//	ingestq.batch.<state>.<bid>     a batch entered <state> (lower case)
//	ingestq.admin.<action>          an operator's action (hold, release, ...)
//	_ingestq.<...>                  internal wake-up signals, never recorded
//
// The stream (DefaultStream) records everything under SubjectAll.
// Subjects under InternalPrefix are outside it by construction.
//
// # Delivery
//
// ZooKeeper is the source of truth; NATS only carries news. [Bus.Publish]
// never waits for NATS: it hands the event to one publisher goroutine (a
// queue of 65,536, so events keep their order), which publishes it to
// JetStream asynchronously. A burst that fills the queue slows the caller
// to the publisher's pace, a few milliseconds per call at most; a stuck
// publisher makes callers drop at once. Events published while the client
// reconnects wait in its 8 MB reconnect buffer, so a short outage loses
// nothing. An event dropped, refused, or unacknowledged within 15 s is
// counted in [Stats].Lost (an upper bound: a buffered event counted lost
// may still be recorded on reconnect) and logged, at most one warning per
// five seconds. Readers that must not miss work rescan ZooKeeper rather
// than trust the bus.
//
// # Reading
//
// [Replay] reads the recorded stream from any connection (the CLI connects
// to a daemon's listener); [Tail] follows live events; [Bus.Subscribe]
// does the same inside the daemon.
package events
