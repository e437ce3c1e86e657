package events

import "testing"

func TestSubject(t *testing.T) {
	tests := []struct {
		name string
		e    Event
		want string
	}{
		{"job", Event{Kind: KindJob, To: "Completed", JobID: "jid0042"}, "ingestq.job.completed.jid0042"},
		{"batch", Event{Kind: KindBatch, To: "Reporting", BatchID: "bid0007"}, "ingestq.batch.reporting.bid0007"},
		{"progress", Event{Kind: KindProgress, To: "Downloading", JobID: "jid0042"}, "ingestq.job.progress.jid0042"},
		{"batch progress", Event{Kind: KindProgress, To: "Pending", BatchID: "bid0007"}, "ingestq.batch.progress.bid0007"},
		{"access progress", Event{Kind: KindProgress, To: "Processing", AccessID: "small/qid0000000003"}, "ingestq.access.progress.small/qid0000000003"},
		{"admin", Event{Kind: KindAdmin, To: "hold", JobID: "jid1"}, "ingestq.admin.hold"},
		{"access", Event{Kind: KindAccess, To: "Completed", AccessID: "qid0000000007"}, "ingestq.access.completed.qid0000000007"},
		{"hostile access", Event{Kind: KindAccess, To: "Failed", AccessID: "qid.*"}, "ingestq.access.failed.qid__"},
		{"job id with dot", Event{Kind: KindJob, To: "Failed", JobID: "a.b"}, "ingestq.job.failed.a_b"},
		{"job id star", Event{Kind: KindJob, To: "Failed", JobID: "*"}, "ingestq.job.failed._"},
		{"batch id gt", Event{Kind: KindBatch, To: "Failed", BatchID: ">"}, "ingestq.batch.failed._"},
		{"empty ids", Event{Kind: KindJob}, "ingestq.job._._"},
		{"empty progress", Event{Kind: KindProgress}, "ingestq.batch.progress._"},
		{"spaces", Event{Kind: KindJob, To: "Held Up", JobID: "my job\tid\n"}, "ingestq.job.held_up.my_job_id_"},
		{"hostile state", Event{Kind: KindBatch, To: "a.*.>", BatchID: "b 1"}, "ingestq.batch.a____.b_1"},
		{"hostile admin", Event{Kind: KindAdmin, To: "re.queue >"}, "ingestq.admin.re_queue__"},
		{"empty admin", Event{Kind: KindAdmin}, "ingestq.admin._"},
		{"unknown kind", Event{Kind: "Audit.x", To: "Done"}, "ingestq.audit_x.done"},
		{"no kind", Event{}, "ingestq._._"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Subject(); got != tt.want {
				t.Errorf("Subject() = %q, want %q", got, tt.want)
			}
		})
	}
}
