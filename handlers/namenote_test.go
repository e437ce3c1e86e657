package handlers_test

import (
	"archive/zip"
	"fmt"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/reactor/queue"
)

// sameNamesElsewhere are names of different bytes that a system ignoring
// case or Unicode normalization takes for one: its depositor's files all.
var sameNamesElsewhere = object{
	"Report.pdf": []byte("upper\n"), "report.pdf": []byte("lower\n"),
	"caf\u00e9.txt": []byte("nfc\n"), "cafe\u0301.txt": []byte("nfd\n"),
	"A/x.txt": []byte("folder upper\n"), "a/x.txt": []byte("folder lower\n"),
	"plain.txt": []byte("no twin\n"),
}

// sameNamesNote is the note of sameNamesElsewhere: each group in byte
// order, the names quoted in ASCII so that NFD (e + U+0301) and NFC (é)
// show apart.
const sameNamesNote = `note: every file is stored under its own name, but these are one name where case or Unicode normalization is ignored (as on Windows and macOS), and unpacking the object there keeps one of each: ` +
	`"A/x.txt" and "a/x.txt", "Report.pdf" and "report.pdf", "cafe\u0301.txt" and "caf\u00e9.txt"`

// windowsUnfitNames are names Windows cannot hold, with a pair that is one
// name there and a name it holds (COM0): its depositor's files all. A
// backslash, a control character, a drive's "a:" and white space at a
// name's end are refused at intake (checkm.CleanName), so no stored name
// has them: a folder may end in a space.
var windowsUnfitNames = object{
	"CON.txt": []byte("device\n"), "aux/x.txt": []byte("device folder\n"), "draft.": []byte("dot\n"), "memo /x.txt": []byte("space\n"),
	"ab:c.txt": []byte("colon\n"), "why?.txt": []byte("question\n"), "<tag>.xml": []byte("angle brackets\n"),
	"Report.pdf": []byte("upper\n"), "report.pdf": []byte("lower\n"), "COM0.txt": []byte("a file on Windows\n"),
}

// windowsUnfitNote is the note of windowsUnfitNames: the pair, then each
// name Windows cannot hold, in byte order, with why.
const windowsUnfitNote = `note: every file is stored under its own name, but these are one name where case or Unicode normalization is ignored (as on Windows and macOS), and unpacking the object there keeps one of each: "Report.pdf" and "report.pdf", ` +
	`and these are names Windows cannot hold, so unpacking the object there fails or changes them: "<tag>.xml" (Windows refuses '<'), "CON.txt" ("CON.txt" is the device CON), "ab:c.txt" (Windows refuses ':'), ` +
	`"aux/x.txt" ("aux" is the device AUX), "draft." ("draft." ends in a dot), "memo /x.txt" ("memo " ends in a space), "why?.txt" (Windows refuses '?')`

// spaceEdged are names with white space where a manifest line's trim
// leaves it: at a file's start, and ending a folder that has its own entry
// in the zip (as zip -r and macOS's Archive Utility write one).
var spaceEdged = object{" lead.txt": []byte("lead\n"), "memo /x.txt": []byte("in a folder ending in a space\n")}

// TestNamesOneElsewhereAreStoredAndNoted deposits, as a zip and as an
// object manifest, files whose names are one on Windows or macOS: each is
// stored byte for byte under its own name, and the job Completes with a
// note naming each group, kept through Storing's and Recording's retries
// and in its line of the batch report. So are names Windows cannot hold,
// in the same note. A deposit with no such names has no note.
func TestNamesOneElsewhereAreStoredAndNoted(t *testing.T) {
	t.Parallel()
	runs := &stepRuns{}
	r := newRig(t, nil, failOnceAfter(runs, queue.Storing, queue.Recording))
	var rows []row
	i := 0
	for name, data := range sameNamesElsewhere {
		rows = append(rows, fileRow(r.content.put(fmt.Sprintf("/files/%d", i), data), name, data))
		i++
	}
	distinct := object{"a.txt": []byte("a"), "b/a.txt": []byte("b/a"), "B.txt": []byte("B")}
	for _, c := range []struct {
		name    string
		payload string
		key     string
		files   object
		note    string
	}{
		{"zip", r.content.put("/same.zip", zipOf(t, sameNamesElsewhere)), "container", sameNamesElsewhere, sameNamesNote},
		{"manifest", r.content.put("/same.checkm", manifest("mrt-ingest-manifest", rows...)), "manifest", sameNamesElsewhere, sameNamesNote},
		{"names Windows cannot hold", r.content.put("/windows.zip", zipOf(t, windowsUnfitNames)), "container", windowsUnfitNames, windowsUnfitNote},
		{"white space at a file's start or a folder's end", r.content.put("/space.zip", zipEntries(t, map[string][]byte{" lead.txt": spaceEdged[" lead.txt"], "memo /": nil,
			"memo /x.txt": spaceEdged["memo /x.txt"]}, zip.Deflate)), "container", spaceEdged,
			`note: every file is stored under its own name, but these are names Windows cannot hold, so unpacking the object there fails or changes them: "memo /x.txt" ("memo " ends in a space)`},
		{"distinct names", r.content.put("/distinct.zip", zipOf(t, distinct)), "container", distinct, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := r.submit(c.payload)
			if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
				t.Fatalf("batch %s: %s %s", b.ID, b.State(), b.Status.Message)
			}
			j := r.jobsOf(b.ID)[c.key]
			r.checkStored(j, c.files)
			if j.Status.Message != c.note {
				t.Errorf("job %s: message %q, want %q", j.ID, j.Status.Message, c.note)
			}
			for _, s := range []queue.State{queue.Storing, queue.Recording} {
				if n := runs.of(s, j.ID); n != 2 {
					t.Errorf("job %s: %s ran %d times, want 2 (a retry)", j.ID, s, n)
				}
			}
			// Every move from Processing on says it, as the job's events
			// (and `ingestq show`, the API) give the message.
			for _, e := range r.jobEvents(j.ID) {
				if movedOnFromProcessing(e) && queue.Note(e.Message) != c.note {
					t.Errorf("job %s: move %s → %s has message %q, want the note %q", j.ID, e.From, e.To, e.Message, c.note)
				}
			}
			if line := r.reportLine(j); c.note != "" && !strings.Contains(line, "("+c.note+")") || c.note == "" && strings.Contains(line, queue.NotePrefix) {
				t.Errorf("job %s: report line %q, want the note %q", j.ID, line, c.note)
			}
		})
	}
}

// movedOnFromProcessing tells a job's move out of Processing or a later step.
func movedOnFromProcessing(e events.Event) bool {
	switch queue.State(e.From) {
	case queue.Processing, queue.Storing, queue.Recording, queue.Notify:
		return e.Kind == events.KindJob
	}
	return false
}

// TestNameEndingInWhiteSpaceIsRefused: a zip entry "memo " would be stored
// as "memo" (the storage manifest's fields are read trimmed), so its job
// fails at Downloading saying why, and nothing is stored.
func TestNameEndingInWhiteSpaceIsRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	payload := r.content.put("/space.zip", zipOf(t, object{"memo ": []byte("space\n"), "plain.txt": []byte("plain\n")}))
	b := r.submit(payload)
	b = r.waitBatch(b.ID, queue.Completed, queue.Failed)
	j := r.jobsOf(b.ID)["container"]
	want := `Downloading: container ` + payload + `: entry "memo ": unsafe file name: ends with white space (U+0020), which a checkm manifest drops: it would be stored under another name`
	if j.State() != queue.Failed || j.Status.Message != want {
		t.Errorf("job %s: %s %q, want Failed %q", j.ID, j.State(), j.Status.Message, want)
	}
}
