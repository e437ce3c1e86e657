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

// nameNoteBytes bounds the names a note gives: it is in the job's status
// node, which ZooKeeper caps at 1 MB, and is read by people.
const nameNoteBytes = 4096

// nameNote names the depositor's files that unpacking the object on
// another system loses or changes: paths that are one path where case or
// Unicode normalization is ignored (Windows, macOS), which keeps one of
// each, and names Windows cannot hold (windowsUnfit). All are stored as
// deposited. "" when there are none. names are the object's file names as
// stored (producer/…); the system files are ingestq's and fit everywhere.
func nameNote(names []string) string {
	groups, unfit := sameNameGroups(names), windowsUnfit(names)
	if len(groups) == 0 && len(unfit) == 0 {
		return ""
	}
	b := noteList{}
	b.WriteString(queue.NotePrefix + "every file is stored under its own name, but ")
	if len(groups) > 0 {
		b.WriteString("these are one name where case or Unicode normalization is ignored (as on Windows and macOS), and unpacking the object there keeps one of each: ")
		for _, g := range groups {
			b.left += len(g)
		}
		for _, g := range groups {
			for k, name := range g {
				sep := ", "
				if k > 0 {
					sep = " and "
				}
				if !b.add(sep, quoteName(name)) {
					break
				}
			}
		}
		b.end()
	}
	if len(unfit) > 0 {
		if len(groups) > 0 {
			b.WriteString(", and ")
		}
		b.WriteString("these are names Windows cannot hold, so unpacking the object there fails or changes them: ")
		b.left = len(unfit)
		for _, u := range unfit {
			if !b.add(", ", quoteName(u.path)+" ("+u.why+")") {
				break
			}
		}
		b.end()
	}
	return b.String()
}

// noteList writes a note's lists of names, one bound for them all: past
// nameNoteBytes, each list counts the names it has left.
type noteList struct {
	strings.Builder
	given bool // the list being written has a name
	left  int  // its names not given
}

// add writes item after sep (none before a list's first), unless the note
// is full: then it tells the list to stop.
func (b *noteList) add(sep, item string) bool {
	if b.Len() >= nameNoteBytes {
		return false
	}
	if b.given {
		b.WriteString(sep)
	}
	b.WriteString(item)
	b.given = true
	b.left--
	return true
}

// end closes a list, counting the names the bound left out.
func (b *noteList) end() {
	switch {
	case b.left > 0 && b.given:
		fmt.Fprintf(b, ", and %d names more", b.left)
	case b.left > 0:
		fmt.Fprintf(b, "%d names", b.left)
	}
	b.given, b.left = false, 0
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

// unfitName is a path Windows cannot hold, and why, naming the first of
// its components at fault.
type unfitName struct {
	path string // producer/ removed
	why  string
}

// windowsRefuses marks the bytes Windows refuses in a name: the control
// characters and <>:"|?*\ (/ parts a path everywhere).
var windowsRefuses = func() (t [utf8.RuneSelf]bool) {
	for c := range byte(' ') {
		t[c] = true
	}
	for _, c := range []byte(`<>:"|?*\`) {
		t[c] = true
	}
	return t
}()

// windowsUnfit lists, in name order, the depositor's paths (producer/
// removed) that Windows cannot hold: a component that is a device name
// (windowsDevice), that ends in a dot or a space (Windows drops them, so
// "a." is made as "a", or not at all), or that holds a byte of
// windowsRefuses. One pass over each path's bytes, the device check only
// on a component whose stem is as short as a device's.
func windowsUnfit(names []string) []unfitName {
	var unfit []unfitName
	for _, n := range names {
		rel, ok := strings.CutPrefix(n, producerDir+"/")
		if !ok {
			continue
		}
		if why := windowsFault(rel); why != "" {
			unfit = append(unfit, unfitName{rel, why})
		}
	}
	slices.SortFunc(unfit, func(a, b unfitName) int { return strings.Compare(a.path, b.path) })
	return unfit
}

// windowsFault says why Windows cannot hold path, or "".
func windowsFault(path string) string {
	start := 0 // of the component
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			if c := path[i]; c < utf8.RuneSelf && windowsRefuses[c] {
				return fmt.Sprintf("Windows refuses %+q", rune(c))
			}
			continue
		}
		comp := path[start:i]
		if dev := windowsDevice(comp); dev != "" {
			return fmt.Sprintf("%s is the device %s", quoteName(comp), dev)
		}
		switch {
		case strings.HasSuffix(comp, "."):
			return quoteName(comp) + " ends in a dot"
		case strings.HasSuffix(comp, " "):
			return quoteName(comp) + " ends in a space"
		}
		start = i + 1
	}
	return ""
}

// windowsDevices are the names Windows takes for a device in every
// folder, in any case: CON, PRN, AUX, NUL, COM1 to COM9 and LPT1 to LPT9
// (with ¹, ² or ³ as a digit too), CONIN$ and CONOUT$. COM0 and LPT0 are
// files (Microsoft's naming page listed them from 2022 to 2025, in error).
var windowsDevices = func() []string {
	devs := []string{"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
	for _, port := range []string{"COM", "LPT"} {
		for _, digit := range strings.Split("123456789\u00b9\u00b2\u00b3", "") {
			devs = append(devs, port+digit)
		}
	}
	return devs
}()

var superscriptDigits = strings.NewReplacer("\u00b9", "1", "\u00b2", "2", "\u00b3", "3")

// windowsDevice is the device a path component names on Windows, or "":
// its stem, before any dot or colon and with trailing spaces dropped, is a
// device's name (as Go's internal/filepathlite isReservedName reads it).
// Windows 11 makes a device name with an extension (CON.txt) a file again;
// Windows 10 and earlier do not.
func windowsDevice(comp string) string {
	stem := comp
	if i := strings.IndexAny(stem, ".:"); i >= 0 {
		stem = stem[:i]
	}
	stem = strings.TrimRight(stem, " ")
	if len(stem) < len("CON") || len(stem) > len("CONOUT$") {
		return ""
	}
	for _, dev := range windowsDevices {
		if strings.EqualFold(stem, dev) {
			return superscriptDigits.Replace(dev) // COM¹ is COM1
		}
	}
	return ""
}
