// Package queue is ingestq's model of the ingest queue in ZooKeeper, in the
// node layout of the Merritt queue library (mrt-zk), so that ingestq and
// Merritt's Java and Ruby tools can share one queue.
//
// # Layout
//
//	/batches/bid##########          submission, status, status-report, lock, states/<bucket>/<jid>
//	/batch-uuids/<batchID>          the bid
//	/jobs/jid##########             bid, priority, space_needed, configuration, status,
//	                                identifiers, metadata, store, inventory, lock
//	/jobs/states/<state>/PP-jid     one ref per job, in the folder of its status
//	/access/{small,large}/qid…      access requests: token, status, lock
//	/locks/queue/…, /locks/collections/…, /locks/storage/…, /locks/inventory/…
//	/ingestq/profiles/<name>        ingestq's own: the profiles the daemons publish,
//	/ingestq/minter/<counter>       the minter's counters,
//	/ingestq/minted/<jid>           each job's minted ARK until its job is done,
//	/ingestq/hosts/<name>           the live daemons and their NATS routes (ephemeral),
//	/ingestq/routes/<name>
//	/ingestq/forgotten/<name>       the hosts an operator took out for good,
//	/ingestq/known/<name>           and every name a daemon registered under
//
// # The one door
//
// Queue is the only code that speaks to ZooKeeper about the queue's nodes.
// Every method takes a context, and every request runs under it and under
// the request timeout (WithRequestTimeout): a request the client holds
// through an outage ends with ErrNoAnswer, which, like a closed connection,
// may still be applied later, and transactions check whether it was. A
// submission and a job's configuration are typed (Submission, JobConfig):
// the fields ingestq reads, under ingestq's or Merritt's names, and every
// other key kept as it was written.
//
// # Jobs
//
//	Pending ─▶ Estimating ─▶ Provisioning ─▶ Downloading ─▶ Processing
//	   │                                                        │
//	   ▼                                                        ▼
//	  Held      Completed ◀─ Notify ◀─ Recording ◀─ Storing ◀───┘
//
// Any working state may go to Failed; an operator requeues a Failed job to
// the state after its last_successful_status, or deletes it. Batches go
// Pending (⇄ Held) → Processing → Reporting → Completed | Failed, and Failed →
// UpdateReporting → Completed | Failed when an operator asks for a new report.
// Access requests go Pending → Processing → Completed | Failed. The machines
// are JobMachine, BatchMachine and AccessMachine (states.go).
//
// # Atomic, fenced changes
//
// Every transition is one ZooKeeper multi(): the status is set at the
// version this view read (the fence), the old ref deleted, the new one
// created, the batch ref moved when the bucket changes, and the lock deleted
// when the step ends. A writer whose view is stale gets ErrStale and has
// written nothing. Acquiring reads a job, then in one multi() creates its
// ephemeral lock and rewrites its status unchanged at the version read, so
// the version moves on at every acquisition: a session that lost its lock
// (it expired, and another took the job) can never commit over the new
// holder. So every job is always listed in exactly one state folder and one
// batch bucket, both matching its status; Check verifies it.
//
// # Broken and foreign trees
//
// Nodes written by other libraries or by hand are read as they are. A node
// that cannot be read (bad JSON, unknown state, priority out of range, a ref
// without a job) is reported with its path — as a problem from the List
// functions, a warning from the Acquire functions, a Violation from Check —
// and skipped; it never stops the listing or acquisition of the rest.
//
// Decisions beyond DESIGN.md are in docs/decisions.md.
package queue
