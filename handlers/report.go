package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Report sends the batch report each way the profile names: by e-mail to
// its notify addresses, when a mailer is configured, and as JSON to its
// report_callback. The reactor publishes every report as an event and
// keeps it in status-report whatever happens here. A way that failed is
// tried again by the reactor, the others not (r.Sent); a callback refused
// for good is not tried again, unless the e-mail is to be.
func (p *Pipeline) Report(ctx context.Context, b *queue.Batch, r reactor.Report) error {
	prof, ok := p.cfg.Profiles.Get(b.Profile())
	if !ok {
		return nil
	}
	if r.Sent == nil {
		r.Sent = map[string]bool{} // a caller that does not retry
	}
	var errs []error
	if p.cfg.Mailer != nil && len(prof.Notify) > 0 && !r.Sent["mail"] {
		subject, body, err := p.ReportText(ctx, b, r)
		if err == nil {
			err = p.cfg.Mailer.Send(ctx, prof.Notify, subject, body)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("e-mailing the report of %s: %w", b.ID, err))
		} else {
			r.Sent["mail"] = true
		}
	}
	refused := false
	if prof.ReportCallback != "" && !r.Sent["callback"] {
		if err := notify.Callback(ctx, p.operator.HTTP(), prof.ReportCallback, newReportCallback(b, r)); err != nil {
			errs = append(errs, fmt.Errorf("report %w", err)) // "report callback URL: …"
			refused = notify.Permanent(err)
		} else {
			r.Sent["callback"] = true
		}
	}
	switch {
	case len(errs) == 0:
		return nil
	case len(errs) == 2:
		return fmt.Errorf("%w; %w", errs[0], errs[1])
	case refused:
		return reactor.Fatal(errs[0])
	}
	return errs[0]
}

// ReportCallback is the JSON a profile's report_callback receives when a
// batch reports: the facts of GET /api/v1/batches/BID's state, message and
// report, with the counts of every job (the lists leave a windowed batch's
// archived jobs out, as the node does).
type ReportCallback struct {
	// ReportID is the same for every delivery of one report (a retry, or
	// another daemon's after a crash) and new for each report asked for
	// again: a receiver that has it ignores the delivery.
	ReportID        string             `json:"report_id"`
	BID             string             `json:"bid"`
	UUID            string             `json:"uuid"`
	Profile         string             `json:"profile"`
	State           queue.State        `json:"state"`   // Completed or Failed
	Message         string             `json:"message"` // "1 of 3 jobs failed", or why the batch failed; then the intake's "note: …"; "" when all went well and there is no note
	Update          bool               `json:"update"`  // a report asked for again (ingestq report BID)
	SuccessfulCount int                `json:"successful_count"`
	FailedCount     int                `json:"failed_count"`
	Report          queue.StatusReport `json:"report"` // the status-report node, its last_modified in RFC 3339
	// Notes gives each job of the batch that has a note its note, by jid
	// (the part of its message that begins "note: ", as "note: every file
	// is stored under its own name, but …"), a windowed batch's archived
	// jobs too, up to about 256 KiB, the rest counted in NotesLeftOut; both
	// left out when no job has one. The status-report node, which
	// ZooKeeper bounds, holds neither.
	Notes        map[string]string `json:"notes,omitempty"`
	NotesLeftOut int               `json:"notes_left_out,omitempty"`
}

func newReportCallback(b *queue.Batch, r reactor.Report) ReportCallback {
	state := queue.Completed
	if r.Failed() {
		state = queue.Failed
	}
	stored := r.Stored
	stored.LastModified = queue.JSONTime(stored.LastModified) // as the API gives it
	return ReportCallback{ReportID: b.ArrivalID(), BID: b.ID, UUID: b.UUID(), Profile: b.Profile(), State: state,
		Message: r.Summary, Update: r.Update, SuccessfulCount: len(r.SuccessfulJobs), FailedCount: len(r.FailedJobs),
		Report: stored, Notes: r.Notes, NotesLeftOut: r.NotesLeftOut}
}

// ReportText is the report as a subject line and a plain-text body: every
// job with its object's identifier, and every failure with its reason.
// The depositor's URLs are masked (redact.Location), as every door below
// admin shows them: its readers are the profile's notify addresses. Its
// error is ZooKeeper out of reach, for the reactor to wait for: the jobs'
// lines would each be that error.
func (p *Pipeline) ReportText(ctx context.Context, b *queue.Batch, r reactor.Report) (subject, body string, err error) {
	outcome := "completed"
	if r.Failed() {
		outcome = "FAILED"
	}
	subject = fmt.Sprintf("[ingestq] batch %s %s: %d completed, %d failed", b.ID, outcome, len(r.SuccessfulJobs), len(r.FailedJobs))
	if r.Update {
		subject += " (updated report)"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "Batch:     %s (%s)\nProfile:   %s\nSubmitter: %s\nPayload:   %s\n",
		b.ID, b.UUID(), b.Profile(), b.Submission.Submitter, redact.Location(b.Submission.PayloadURL))
	if r.Failed() { // how many failed, and were cancelled by whom; not the note, which fails nothing
		fmt.Fprintf(&s, "\nThe batch failed: %s\n", r.Failure)
	}
	if r.Note != "" {
		fmt.Fprintf(&s, "\n%s\n", r.Note)
	}
	if len(r.SuccessfulJobs) > 0 {
		fmt.Fprintf(&s, "\nCompleted (%d):\n", len(r.SuccessfulJobs))
		for _, jid := range r.SuccessfulJobs {
			d, err := p.describe(ctx, jid, r)
			if err != nil {
				return "", "", err
			}
			fmt.Fprintf(&s, "  %s  %s\n", jid, d)
		}
	}
	if len(r.FailedJobs) > 0 {
		fmt.Fprintf(&s, "\nFailed (%d):\n", len(r.FailedJobs))
		for _, jid := range r.FailedJobs {
			d, err := p.describe(ctx, jid, r)
			if err != nil {
				return "", "", err
			}
			fmt.Fprintf(&s, "  %s  %s\n      reason: %s\n", jid, d, r.Messages[jid])
		}
	}
	return subject, s.String(), nil
}

// describe names a job's object: its identifier and where it came from. A
// windowed batch's archived job, whose nodes are gone, is described as
// the report has it (r.Objects, r.Notes): its identifiers and note. A job
// that cannot be read otherwise is described by why, unless ZooKeeper is
// out of reach (the error).
func (p *Pipeline) describe(ctx context.Context, jid string, r reactor.Report) (string, error) {
	j, err := p.q.LoadJob(ctx, jid)
	if queue.Unreachable(err) {
		return "", err
	}
	if archived := r.Objects[jid]; errors.Is(err, queue.ErrNotFound) && archived != nil {
		parts := identifierParts(archived)
		if note := r.Notes[jid]; note != "" {
			parts = append(parts, "("+note+")")
		}
		return strings.Join(parts, "  "), nil
	}
	if err != nil {
		return "(" + err.Error() + ")", nil
	}
	parts := identifierParts(j.Identifiers)
	parts = append(parts, redact.Location(j.Config.PayloadURL))
	if note := unchangedNote(j); note != "" {
		parts = append(parts, "("+note+")")
	}
	// A failed job's reason, its message, has its note already.
	if note := queue.Note(j.Status.Message); note != "" && j.State() == queue.Completed {
		parts = append(parts, "("+note+")")
	}
	return strings.Join(parts, "  "), nil
}

// identifierParts are a job's object's identifiers as its report line
// gives them: the ARK, then "local id" and its ids.
func identifierParts(ids *queue.Identifiers) []string {
	var parts []string
	if ids != nil && ids.PrimaryID != "" {
		parts = append(parts, ids.PrimaryID)
	}
	if ids != nil && len(ids.LocalIDs) > 0 {
		parts = append(parts, "local id "+strings.Join(ids.LocalIDs, ";"))
	}
	return parts
}

// unchangedNote says, for a job whose deposit changed nothing, which
// version already held its content; "" for any other job. It is the
// Completed job's message, and its line in the batch report.
func unchangedNote(j *queue.Job) string {
	if j.Inventory == nil || !j.Inventory.Unchanged {
		return ""
	}
	return fmt.Sprintf("unchanged: version %d already held this content; no version was made", j.Inventory.Version)
}
