package handlers_test

import (
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A report whose jobs cannot be read because ZooKeeper is out of reach is
// not e-mailed: the reporter returns ZooKeeper's error, which the reactor
// waits out (its attempt unspent) before it reports again. The e-mail was
// sent, each job's line "(load job …: zk: could not connect to a server)".
func TestReportWaitsForZooKeeper(t *testing.T) {
	t.Parallel()
	sink := startSMTPSink(t)
	proxy, err := zktest.StartProxy(zktest.Shared(t).Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	prof := profile.Default()
	prof.Notify = []string{"curator@example.org"}
	r := newRig(t, prof, func(hc *handlers.Config, _ *reactor.Config) {
		hc.Mailer = &notify.Mailer{Addr: sink.addr, From: "ingestq@example.org"}
		// The pipeline's own reads go through the proxy; the reactor's do not.
		s, err := zkwatch.Dial(t.Context(), zkwatch.Config{Servers: []string{proxy.Addr()}, SessionTimeout: zktest.SessionTimeout, Logger: hc.Logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		hc.Queue = queuetest.Queue(t, s, hc.Queue.Path(""), hc.Logger)
	})
	if err := proxy.Close(); err != nil {
		t.Fatal(err)
	}
	b := &queue.Batch{ID: "bid0000000001", Submission: queue.Submission{Profile: prof.Name}}
	rep := reactor.Report{StatusReport: queue.StatusReport{SuccessfulJobs: []string{"jid0000000001"}}, Sent: map[string]bool{}}
	if err := r.p.Report(t.Context(), b, rep); !queue.Unreachable(err) {
		t.Errorf("the report with ZooKeeper away: %v, want ZooKeeper's own unreachable error", err)
	}
	select {
	case m := <-sink.msgs:
		t.Errorf("a report was e-mailed with ZooKeeper away:\n%s", m.data)
	default: // the sink records a message before Send returns
	}
}
