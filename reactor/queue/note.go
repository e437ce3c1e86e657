package queue

import "strings"

// NotePrefix starts the part of a message that is a note to the depositor
// (what of the submission a batch handler did not use; names two of an
// object's files share on another system), not a failure. A note holds no
// "; ", which joins a message's parts.
const NotePrefix = "note: "

// maxMessage cuts a job's or batch's message (a step's error may quote
// anything, 300 KB of "<" is 1.8 MB in the status's JSON): written whole,
// a message over ZooKeeper's packet was refused (ErrTooLarge) and the job
// left in its state, its step run again without end. A note (4 KB of
// names at most) is kept after the cut.
const maxMessage = 16 << 10

// maxAccessMessage cuts an access request's message: its token, created
// with room for its result, counts on it (accessResultRoom).
const maxAccessMessage = 4000

// Note is the note among the parts of message, or "".
func Note(message string) string {
	for part := range strings.SplitSeq(message, "; ") {
		if strings.HasPrefix(part, NotePrefix) {
			return part
		}
	}
	return ""
}

// KeepNote is msg, an item's new message, with the note of was, its
// message until now, after it, unless msg has a note of its own: a note
// stays through every later write of the item, a step's, a wait's, a
// retry's or an operator's, to its end.
func KeepNote(msg, was string) string {
	note := Note(was)
	switch {
	case note == "" || Note(msg) != "":
		return msg
	case msg == "":
		return note
	}
	return msg + "; " + note
}
