package handlers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// TestSameNameGroups covers what folds to one and what does not, and how
// the note names it.
func TestSameNameGroups(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  [][]string
	}{
		{"case", []string{"Report.pdf", "report.pdf", "REPORT.PDF"}, [][]string{{"REPORT.PDF", "Report.pdf", "report.pdf"}}},
		{"NFC and NFD", []string{"caf\u00e9.txt", "cafe\u0301.txt"}, [][]string{{"cafe\u0301.txt", "caf\u00e9.txt"}}},
		{"case and NFD", []string{"CAF\u00c9", "cafe\u0301"}, [][]string{{"CAF\u00c9", "cafe\u0301"}}},
		{"folder", []string{"A/x.txt", "a/x.txt", "a/y.txt"}, [][]string{{"A/x.txt", "a/x.txt"}}},
		{"file and folder", []string{"a", "A/b/x.txt"}, [][]string{{"A/b/x.txt", "a"}}},
		{"file and deeper folder", []string{"a/B", "A/b/x.txt"}, [][]string{{"A/b/x.txt", "a/B"}}},
		{"Kelvin sign", []string{"\u212a.txt", "k.txt"}, [][]string{{"k.txt", "\u212a.txt"}}},
		{"sharp s, full folding", []string{"Stra\u00dfe", "strasse"}, [][]string{{"Stra\u00dfe", "strasse"}}},
		{"distinct", []string{"a.txt", "b/a.txt", "B.txt", "\u00e9", "e"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := []string{systemDir + "/mrt-erc.txt", systemDir + "/MRT-ERC.TXT"} // ingestq's: not checked
			for _, f := range tt.files {
				names = append(names, producerDir+"/"+f)
			}
			if got := sameNameGroups(names); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("groups %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSameNameNoteHoldsNoPartSeparator: a name with "; " is escaped, so
// the note stays one part of the message, and two thousand names are not
// all given.
func TestSameNameNoteHoldsNoPartSeparator(t *testing.T) {
	note := nameNote([]string{producerDir + "/a; b", producerDir + "/A; B"})
	if strings.Contains(note, "; ") || !strings.Contains(note, `"A\x3b B" and "a\x3b b"`) {
		t.Errorf("note %q, want the names quoted with ';' escaped", note)
	}
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf("%s/f%04d", producerDir, i), fmt.Sprintf("%s/F%04d", producerDir, i))
	}
	note = nameNote(many)
	named := strings.Count(note, `"`) / 2
	if want := fmt.Sprintf(", and %d names more", 2000-named); len(note) > nameNoteBytes+100 || !strings.HasSuffix(note, want) {
		t.Errorf("note of 1000 groups, %d bytes, ends %q; want at most about %d bytes ending %q", len(note), note[max(0, len(note)-40):], nameNoteBytes, want)
	}
}

// TestWindowsUnfit covers each kind of name Windows cannot hold, in a file
// or a folder, and names it can that look alike.
func TestWindowsUnfit(t *testing.T) {
	tests := []struct {
		path string
		why  string // "": Windows holds it
	}{
		{"CON", `"CON" is the device CON`},
		{"con.txt", `"con.txt" is the device CON`},
		{"a/Nul.tar.gz", `"Nul.tar.gz" is the device NUL`},
		{"aux /x.txt", `"aux " is the device AUX`},
		{"prn .txt", `"prn .txt" is the device PRN`},
		{"lpt9", `"lpt9" is the device LPT9`},
		{"COM\u00b9.log", `"COM\u00b9.log" is the device COM1`},
		{"conout$", `"conout$" is the device CONOUT$`},
		{"draft.", `"draft." ends in a dot`},
		{"draft./x", `"draft." ends in a dot`},
		{"memo ", `"memo " ends in a space`},
		{"a:b.txt", `Windows refuses ':'`},
		{`a\b.txt`, `Windows refuses '\\'`},
		{"why?.txt", `Windows refuses '?'`},
		{"<>|*\"", `Windows refuses '<'`},
		{"tab\there", `Windows refuses '\t'`},
		{"x/\x1f", `Windows refuses '\x1f'`},
		// Windows holds these.
		{"COM0", ""}, {"LPT0.txt", ""}, {"COM10", ""}, {"CONSOLE.txt", ""}, {"connect", ""}, {"auxiliary/x", ""},
		{"nul-report.pdf", ""}, {".hidden", ""}, {"a. b", ""}, {" lead", ""}, {"caf\u00e9", ""}, {"\u00e9t\u00e9.", `"\u00e9t\u00e9." ends in a dot`},
	}
	for _, tt := range tests {
		got := windowsUnfit([]string{systemDir + "/CON", producerDir + "/" + tt.path})
		want := []unfitName(nil)
		if tt.why != "" {
			want = []unfitName{{tt.path, tt.why}}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+q: %q, want %q", tt.path, got, want)
		}
	}
}

// TestNameNoteNamesBoth: one note gives the names one elsewhere and the
// names Windows cannot hold, and the 4 KiB bound is shared: past it, each
// list counts what it left out.
func TestNameNoteNamesBoth(t *testing.T) {
	note := nameNote([]string{producerDir + "/A.txt", producerDir + "/a.txt", producerDir + "/CON.txt", producerDir + "/x:y"})
	want := `note: every file is stored under its own name, but these are one name where case or Unicode normalization is ignored (as on Windows and macOS), and unpacking the object there keeps one of each: "A.txt" and "a.txt", ` +
		`and these are names Windows cannot hold, so unpacking the object there fails or changes them: "CON.txt" ("CON.txt" is the device CON), "x:y" (Windows refuses ':')`
	if note != want {
		t.Errorf("note\n%s\nwant\n%s", note, want)
	}
	if note := nameNote([]string{producerDir + "/aux"}); !strings.HasPrefix(note, queue.NotePrefix+"every file is stored under its own name, but these are names Windows cannot hold") {
		t.Errorf("note of a device name alone: %q", note)
	}
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf("%s/f%04d", producerDir, i), fmt.Sprintf("%s/F%04d", producerDir, i), fmt.Sprintf("%s/g%04d.", producerDir, i))
	}
	note = nameNote(many)
	if !strings.HasSuffix(note, "fails or changes them: 1000 names") || len(note) > nameNoteBytes+300 || !strings.Contains(note, " names more, and these are names Windows cannot hold") {
		t.Errorf("note of 1000 groups and 1000 unfit names, %d bytes, ends %q; want at most about %d bytes, each list counted", len(note), note[max(0, len(note)-200):], nameNoteBytes)
	}
}

// BenchmarkSameNameNote checks 100,000 names (a fifth non-ASCII), beside
// the plain map insert of the same names it is measured against.
func BenchmarkSameNameNote(b *testing.B) {
	names := make([]string, 100_000)
	for i := range names {
		names[i] = fmt.Sprintf("%s/folder%03d/file%06d.tif", producerDir, i%1000, i)
		if i%5 == 0 {
			names[i] = fmt.Sprintf("%s/dossier%03d/caf\u00e9%06d.tif", producerDir, i%1000, i)
		}
	}
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if nameNote(names) != "" {
				b.Fatal("a note for distinct names")
			}
		}
	})
	b.Run("windows alone", func(b *testing.B) {
		for b.Loop() {
			if windowsUnfit(names) != nil {
				b.Fatal("names Windows holds found unfit")
			}
		}
	})
	b.Run("map insert", func(b *testing.B) {
		for b.Loop() {
			m := make(map[string]bool, len(names))
			for _, n := range names {
				m[n] = true
			}
		}
	})
}
