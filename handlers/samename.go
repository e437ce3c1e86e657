package handlers

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/ingestq/ingestq/reactor/queue"
)

// sameNameNoteBytes bounds the names a note gives: it is in the job's
// status node, which ZooKeeper caps at 1 MB, and is read by people.
const sameNameNoteBytes = 4096

// sameNameNote names the depositor's files whose paths are one path on a
// system that ignores case or Unicode normalization (Windows, macOS): all
// are kept, but unpacking the object there keeps one of each group. "" when
// there are none. names are the object's file names as stored (producer/…); the
// system files are ingestq's and never collide.
func sameNameNote(names []string) string {
	groups := sameNameGroups(names)
	if len(groups) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(queue.NotePrefix + "every file is stored under its own name, but these are one name where case or Unicode normalization is ignored (as on Windows and macOS), and unpacking the object there keeps one of each: ")
	left := 0 // names not yet given
	for _, g := range groups {
		left += len(g)
	}
	for i, g := range groups {
		for k, name := range g {
			if b.Len() >= sameNameNoteBytes {
				fmt.Fprintf(&b, ", and %d names more", left)
				return b.String()
			}
			switch {
			case k > 0:
				b.WriteString(" and ")
			case i > 0:
				b.WriteString(", ")
			}
			b.WriteString(quoteName(name))
			left--
		}
	}
	return b.String()
}

// sameNameGroups are the depositor's paths (producer/ removed) that are
// one on such a system, two or more to a group, each group in name order
// and the groups in the order of their first name. A file and a folder
// that are one (a and A/x.txt) are a group too, the folder named by a file
// in it: unpacked there, one of them cannot be made.
func sameNameGroups(names []string) [][]string {
	first := make(map[string]string, len(names)) // folded path → the first path
	more := map[string][]string{}                // folded path → the other paths, when there are
	folders := map[string]string{}               // folded folder → a path under it
	fold := cases.Fold()                         // one for the call: not safe for concurrent use
	for _, n := range names {
		rel, ok := strings.CutPrefix(n, producerDir+"/")
		if !ok {
			continue
		}
		k := foldName(fold, rel)
		if _, seen := first[k]; seen {
			more[k] = append(more[k], rel)
		} else {
			first[k] = rel
		}
		for i := strings.LastIndexByte(k, '/'); i > 0; i = strings.LastIndexByte(k[:i], '/') {
			if _, seen := folders[k[:i]]; seen {
				break // its parents were recorded with it
			}
			folders[k[:i]] = rel
		}
	}
	for k, under := range folders {
		if _, ok := first[k]; ok {
			more[k] = append(more[k], under)
		}
	}
	groups := make([][]string, 0, len(more))
	for k, others := range more {
		g := append([]string{first[k]}, others...)
		slices.Sort(g)
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups
}

// foldName is a path's canonical caseless form (Unicode's D145:
// NFD(fold(NFD(p)))): Report.pdf and report.pdf, café in NFC and in NFD,
// A/x and a/x are one. Full case folding (ß is ss) names a pair that only
// some systems merge: a note too many costs a reading, one too few a file.
// An ASCII path needs neither step beyond lower case.
func foldName(fold cases.Caser, p string) string {
	if isASCII(p) {
		return strings.ToLower(p)
	}
	return norm.NFD.String(fold.String(norm.NFD.String(p)))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// quoteName quotes a name in ASCII, so that the note shows NFC and NFD
// apart ("caf\u00e9", "cafe\u0301"), with ';' escaped: a message's parts
// are joined by "; ", and a note holds none (queue.NotePrefix).
func quoteName(name string) string {
	return strings.ReplaceAll(fmt.Sprintf("%+q", name), ";", `\x3b`)
}
