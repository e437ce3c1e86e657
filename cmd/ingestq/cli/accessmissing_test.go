package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/queuetest"
	"github.com/ingestq/ingestq/reactor/queue"
)

// An access request not in the queue, and of which no event tells, is
// named as asked (its queue kept, or a bare qid) and said, as a job is, to
// be one this queue has not made, or one it made and is gone: its number
// is past the queue's sequence, or not. A removal passes over a number
// too, so a number the sequence has passed is said to be either.
func TestAccessNotFoundSaysWhetherThisQueueMadeIt(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	a, err := d.q.CreateAccess(t.Context(), queue.AccessSmall, map[string]any{"ark": "ark:/99999/fk4missing"})
	d.ok(err)
	if a.ID != "qid0000000000" {
		t.Fatalf("the queue's first request is %s, want qid0000000000", a.ID)
	}
	// Another tool removes it, as mrt-zk's Access.delete does: no event.
	for _, p := range []string{"/status", "/token", ""} {
		d.ok(d.conn.Delete(d.q.Path("/access/small/"+a.ID+p), -1))
	}
	const (
		never = ": no such access request (this queue has not made it)"
		gone  = ": no such access request (this queue has made it and it is gone, or passed over its number; no event records which)"
	)
	for ref, want := range map[string]string{
		"small/qid0000000000": gone,  // made, removed
		"small/qid0000000001": gone,  // passed over by the removal
		"small/qid0000000002": never, // the next the queue makes
		"qid0000000002":       never, // in neither queue
		"qid0000000000":       gone,
		"large/qid0000000000": never, // the large queue numbers its own
	} {
		_, stderr, code := d.cli("access", "show", ref)
		wantCode(t, code, 1)
		wantErrLine(t, stderr, "ingestq: access request "+ref+want)
	}
}

// show names the host assembling a Processing request, and says of a
// Completed folder package whose host is not running that its URL answers
// nothing until that host is back.
func TestAccessShowSaysWhoAssemblesAndWhetherItsHostRuns(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	ctx := t.Context()
	d.ok(d.q.RegisterHost(ctx, "h1", nil)) // the test's queue works as the daemon of host h1
	tok := queue.AccessToken{Token: "t-who", ARK: "ark:/99999/fk4who", Format: queue.FormatZip, TokenStatus: queue.TokenNotReady}
	created, err := d.q.CreateAccess(ctx, queue.AccessSmall, tok.Map(nil))
	d.ok(err)
	a := queuetest.TakeAccess(t, d.q, created.Ref())
	out, _, code := d.cli("access", "show", a.Ref())
	wantCode(t, code, 0)
	if !regexp.MustCompile(`(?m)^assembling_on: +h1$`).MatchString(out) {
		t.Errorf("show of a request h1 assembles:\n%s\nwant assembling_on: h1", out)
	}
	queuetest.CompleteAccess(t, d.q, a, "folder", "h9")
	out, _, code = d.cli("access", "show", a.Ref())
	wantCode(t, code, 0)
	want := regexp.MustCompile(`(?m)^unreachable: +its host h9 is not running: the package is reachable again when h9 is back, or ask again$`)
	if !want.MatchString(out) || strings.Contains(out, "assembling_on") {
		t.Errorf("show of a package of h9:\n%s\nwant it unreachable, no assembling_on", out)
	}
}
