package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Report e-mails the batch report to the profile's addresses, when it
// names some and a mailer is configured. The reactor publishes every report
// as an event and keeps it in status-report whatever happens here.
func (p *Pipeline) Report(ctx context.Context, b *queue.Batch, r reactor.Report) error {
	if p.cfg.Mailer == nil {
		return nil
	}
	prof, ok := p.cfg.Profiles.Get(b.Profile())
	if !ok || len(prof.Notify) == 0 {
		return nil
	}
	subject, body := p.ReportText(ctx, b, r)
	if err := p.cfg.Mailer.Send(ctx, prof.Notify, subject, body); err != nil {
		return fmt.Errorf("e-mailing the report of %s: %w", b.ID, err)
	}
	return nil
}

// ReportText is the report as a subject line and a plain-text body: every
// job with its object's identifier, and every failure with its reason.
func (p *Pipeline) ReportText(ctx context.Context, b *queue.Batch, r reactor.Report) (subject, body string) {
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
		b.ID, b.UUID(), b.Profile(), b.Submission.Submitter, b.Submission.PayloadURL)
	if r.Message != "" {
		fmt.Fprintf(&s, "\nThe batch failed: %s\n", r.Message)
	}
	if len(r.SuccessfulJobs) > 0 {
		fmt.Fprintf(&s, "\nCompleted (%d):\n", len(r.SuccessfulJobs))
		for _, jid := range r.SuccessfulJobs {
			fmt.Fprintf(&s, "  %s  %s\n", jid, p.describe(ctx, jid))
		}
	}
	if len(r.FailedJobs) > 0 {
		fmt.Fprintf(&s, "\nFailed (%d):\n", len(r.FailedJobs))
		for _, jid := range r.FailedJobs {
			fmt.Fprintf(&s, "  %s  %s\n      reason: %s\n", jid, p.describe(ctx, jid), r.Messages[jid])
		}
	}
	return subject, s.String()
}

// describe names a job's object: its identifier and where it came from.
func (p *Pipeline) describe(ctx context.Context, jid string) string {
	j, err := p.q.LoadJob(ctx, jid)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	var parts []string
	if j.Identifiers != nil && j.Identifiers.PrimaryID != "" {
		parts = append(parts, j.Identifiers.PrimaryID)
	}
	if j.Identifiers != nil && len(j.Identifiers.LocalIDs) > 0 {
		parts = append(parts, "local id "+strings.Join(j.Identifiers.LocalIDs, ";"))
	}
	parts = append(parts, j.Config.PayloadURL)
	if note := unchangedNote(j); note != "" {
		parts = append(parts, "("+note+")")
	}
	return strings.Join(parts, "  ")
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
