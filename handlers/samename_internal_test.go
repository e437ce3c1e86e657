package handlers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
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
	note := sameNameNote([]string{producerDir + "/a; b", producerDir + "/A; B"})
	if strings.Contains(note, "; ") || !strings.Contains(note, `"A\x3b B" and "a\x3b b"`) {
		t.Errorf("note %q, want the names quoted with ';' escaped", note)
	}
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf("%s/f%04d", producerDir, i), fmt.Sprintf("%s/F%04d", producerDir, i))
	}
	note = sameNameNote(many)
	named := strings.Count(note, `"`) / 2
	if want := fmt.Sprintf(", and %d names more", 2000-named); len(note) > sameNameNoteBytes+100 || !strings.HasSuffix(note, want) {
		t.Errorf("note of 1000 groups, %d bytes, ends %q; want at most about %d bytes ending %q", len(note), note[max(0, len(note)-40):], sameNameNoteBytes, want)
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
			if sameNameNote(names) != "" {
				b.Fatal("a note for distinct names")
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
