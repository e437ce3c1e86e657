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
//	ingestq.batch.progress.<bid>    a Pending batch waits (its payload server busy)
//	ingestq.admin.<action>          an operator's action (hold, release, ...)
//	ingestq.access.<state>.<ref>    an access request entered <state> (lower case)
//	_ingestq.<host>.<...>           a daemon's own wake-up signals, never recorded
//
// The stream (DefaultStream) records everything under SubjectAll.
// Subjects under InternalPrefix are outside it by construction. Events go
// to every daemon on the same NATS; a signal is scoped by its bus's host
// ([SignalSubject]), so it wakes only that daemon's pools.
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
// nothing. An event the stream does not acknowledge within 15 s is sent
// again under its ID, after a growing pause, for a minute ([Stats].Retried;
// JetStream keeps one copy per ID); one still unanswered when the stream
// announces a new leader is sent again at once ([Stats].ResentAtElection).
// One still unacknowledged after that minute is held ([Stats].Parked)
// until the stream takes events again, up to 64 MiB. An event dropped,
// refused, or past that cap is counted in [Stats].Lost (an upper bound: a
// buffered event counted lost may still be recorded on reconnect) and
// logged, at most one warning per five seconds. At Close, the events the
// stream has not acknowledged are kept in the data folder
// (events-kept.jsonl) rather than counted lost, and the next start on
// that folder publishes them first, under their IDs; a replay shows a
// kept event once even when the stream had stored it before. While the
// bus runs, that file holds the events held, so a process killed outright
// sends them at its next start too. Readers that must not miss work
// rescan ZooKeeper rather than trust the bus.
//
// # One stream for a cluster of daemons
//
// An embedded server given a cluster address (Config.Cluster) is routed to
// the other daemons' servers ([Bus.SetRoutes]; the daemon learns them from
// ZooKeeper), and their JetStream keeps one stream for all, with three
// replicas once three servers are in the cluster. A clustered JetStream
// cannot elect its meta leader alone, so a server that knows no other runs
// JetStream alone; when a first route comes the bus replaces its server
// with a cluster member, on the same ports, and moves what it recorded
// alone into the cluster's stream (docs/decisions.md, issue 11). Events
// published meanwhile wait in the queue. With Config.ClusterSecret a member
// refuses every route that does not present the secret and presents it on
// the routes it dials from ZooKeeper; the route URLs the daemons announce
// have none, and a refused route is said once on each side. Daemons may
// instead all join one existing NATS cluster (Config.URL); the bus never
// lowers the replicas an operator gave the stream. The stream's metadata names the queue whose
// events it records: on a joined NATS a daemon of another queue is refused
// at start, also when both create the stream at the same instant.
//
// # Reading
//
// [Replay] reads the recorded stream from any connection (the CLI connects
// to a daemon's listener), and asks the stream's leader whether it is at
// the end, so that a replay from a member still catching up (just
// restarted) is whole or fails saying it may be incomplete; [Tail] follows
// live events; [Bus.Subscribe] does the same inside the daemon.
package events
