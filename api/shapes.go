package api

import (
	"regexp"

	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/reactor/stalled"
)

// batchStatus is a batch's detail: ops.BatchStatus with its times in RFC
// 3339, and its state under both names (status, as the batch list and
// mrt-zk's node call it; state, as the detail always did).
type batchStatus struct {
	*ops.BatchStatus
	Status queue.State         `json:"status"`
	Report *queue.StatusReport `json:"report"`
	Hold   string              `json:"hold,omitempty"` // why a Held batch is held
}

func newBatchStatus(st *ops.BatchStatus) batchStatus {
	out := batchStatus{BatchStatus: st, Status: st.State}
	st.LastModified = queue.JSONTime(st.LastModified)
	if st.Report != nil {
		r := *st.Report
		r.LastModified = queue.JSONTime(r.LastModified)
		out.Report = &r
	}
	return out
}

// jobRow is a job in the API's listing: ops.JobRow with its time in RFC
// 3339 and, with ?stalled=true, why it is stalled.
type jobRow struct {
	ops.JobRow
	Stalled *stalled.Stall `json:"stalled,omitempty"`
}

func newJobRow(r ops.JobRow) jobRow {
	r.LastModified = queue.JSONTime(r.LastModified)
	return jobRow{JobRow: r}
}

// Cursors (?after=) are what a page's next gave: a jid, a bid, or a job
// state's ref (PP-jid…). Anything else is refused, naming the parameter:
// an unknown cursor would page from nowhere and answer an empty page.
var (
	jidCursor = regexp.MustCompile(`^jid[0-9]+$`)
	bidCursor = regexp.MustCompile(`^bid[0-9]+$`)
	refCursor = regexp.MustCompile(`^[0-9]{2}-jid[0-9]+$`)
)

// checkCursor refuses an ?after= that is not what want matches (what says
// what it should be).
func checkCursor(after string, want *regexp.Regexp, what string) error {
	if after == "" || want.MatchString(after) {
		return nil
	}
	return badRequest("query parameter \"after\": %q is not a cursor of this listing (want %s: the previous page's next)", after, what)
}
