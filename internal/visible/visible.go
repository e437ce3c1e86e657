// Package visible shows text from the queue (names, titles, messages a
// depositor or a foreign program wrote) to a person without letting it
// act on the screen: a terminal control sequence clears or rewrites the
// operator's terminal, a bidirectional control shows a name in another
// order ("report\u202efdp.exe" reads "reportexe.pdf").
package visible

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s with each control character (C0, DEL, C1) and Unicode
// bidirectional control (U+061C, U+200E-F, U+202A-E, U+2066-9) written as
// JSON writes an escape: \t, \n, \r, else \u001b, \u202e. Bytes that are
// not UTF-8 become U+FFFD. A backslash stays as it is, so Text of its
// result is the same, and its result put inside a JSON string decodes to
// s (when s is UTF-8).
func Text(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // a byte that is not UTF-8 comes as U+FFFD
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hidden reports a character that acts instead of showing: the ones
// ingest refuses in a file name (checkm.CleanName).
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}
