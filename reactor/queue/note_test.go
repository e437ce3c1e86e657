package queue_test

import (
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A note to the depositor stays in a job's message through an operator's
// moves as through a daemon's: a hold keeps it alone, a cancel after its
// own words.
func TestJobNoteStaysThroughOperatorMoves(t *testing.T) {
	const note = queue.NotePrefix + "two names are one elsewhere"
	r := newRun(t)
	j := r.job(r.processing(true), "jid0", 5, nil)
	r.ok(r.q.UpdateJob(t.Context(), j, queue.JobChange{Message: "downloaded; " + note}))
	_, err := r.q.HoldJob(t.Context(), j.ID)
	r.ok(err)
	held, err := r.q.LoadJob(t.Context(), j.ID)
	r.ok(err)
	if held.State() != queue.Held || held.Status.Message != note {
		t.Errorf("held job %s %q, want Held %q", held.State(), held.Status.Message, note)
	}
	_, _, err = r.q.CancelJob(t.Context(), j.ID, "cancelled by tester")
	r.ok(err)
	got, err := r.q.LoadJob(t.Context(), j.ID)
	r.ok(err)
	if want := "cancelled by tester; " + note; got.Status.Message != want {
		t.Errorf("cancelled job %q, want %q", got.Status.Message, want)
	}
}

func TestKeepNote(t *testing.T) {
	const note = queue.NotePrefix + "n"
	for _, c := range []struct{ msg, was, want string }{
		{"", "", ""},
		{"step failed", "", "step failed"},
		{"", "x; " + note, note},
		{"waiting", note, "waiting; " + note},
		{"waiting; " + note, note, "waiting; " + note}, // written again: once
		{queue.NotePrefix + "other", note, queue.NotePrefix + "other"},
		{"a note: in words", "was", "a note: in words"},
	} {
		if got := queue.KeepNote(c.msg, c.was); got != c.want {
			t.Errorf("KeepNote(%q, %q) = %q, want %q", c.msg, c.was, got, c.want)
		}
	}
}
