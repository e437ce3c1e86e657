// Package visible shows text from the queue (names, titles, messages a
// depositor or a foreign program wrote) to a person without letting it
// act on the screen or hide in it: a terminal control sequence clears or
// rewrites the operator's terminal, a bidirectional control shows a name
// in another order ("report\u202efdp.exe" reads "reportexe.pdf"), an
// invisible character makes two names look alike or carries text no one
// sees (tag characters).
package visible

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Text returns s with each control character (C0, DEL, C1), Unicode
// bidirectional control (U+061C, U+200E-F, U+202A-E, U+2066-9) and
// invisible character (see invisible; a joiner only outside the scripts
// that need it, see joins) written as JSON writes an escape: \t, \n, \r,
// else \u001b, \u202e, and a surrogate pair above U+FFFF. Bytes that are
// not UTF-8 become U+FFFD. A backslash stays as it is, so Text of its
// result is the same, and its result put inside a JSON string decodes to
// s (when s is UTF-8).
func Text(s string) string {
	maybe := func(r rune) bool { return hidden(r) || unicode.Is(joiners, r) }
	if utf8.ValidString(s) && !strings.ContainsFunc(s, maybe) {
		return s
	}
	var b strings.Builder
	// last is the character before r (0, which joins nothing, at the
	// start); a byte that is not UTF-8 comes as U+FFFD.
	var last rune
	for i, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case hidden(r), unicode.Is(joiners, r) && !joins(last, s[i+utf8.RuneLen(r):]):
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
		last = r
	}
	return b.String()
}

// hidden reports a character that acts instead of showing, or shows
// nothing: the controls ingest refuses in a file name (checkm.CleanName)
// and the invisible characters.
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || unicode.Is(invisible, r)
}

// invisible are format characters that show nothing and have no part in
// writing a name: soft hyphen, zero-width space, word joiner, invisible
// operators, the deprecated format controls U+206A-F, the byte order
// mark, interlinear annotation (hides the text it annotates) and tag
// characters (carry ASCII no one sees; a subdivision flag shows as its
// black flag and escapes).
var invisible = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x00ad, Hi: 0x00ad, Stride: 1},
		{Lo: 0x200b, Hi: 0x200b, Stride: 1},
		{Lo: 0x2060, Hi: 0x206f, Stride: 1},
		{Lo: 0xfeff, Hi: 0xfeff, Stride: 1},
		{Lo: 0xfff9, Hi: 0xfffb, Stride: 1},
	},
	R32:         []unicode.Range32{{Lo: 0xe0000, Hi: 0xe007f, Stride: 1}},
	LatinOffset: 1,
}

// joiners are the zero-width non-joiner and joiner and the Mongolian vowel
// separator: invisible, but part of how Persian, Indic and Mongolian names
// are written and of emoji sequences (family, profession, flag).
var joiners = &unicode.RangeTable{R16: []unicode.Range16{
	{Lo: 0x180e, Hi: 0x180e, Stride: 1},
	{Lo: 0x200c, Hi: 0x200d, Stride: 1},
}}

// joins reports a joiner between before and the first character of after
// where a script may need it: both letters, marks or symbols, neither
// ASCII nor Latin, Greek or Cyrillic, which never join with one (so
// "pay\u200dpal" shows its joiner, and "می\u200cخواهم" or an emoji family
// do not).
func joins(before rune, after string) bool {
	next, _ := utf8.DecodeRuneInString(after)
	return joinable(before) && joinable(next)
}

func joinable(r rune) bool {
	return r >= utf8.RuneSelf && r != utf8.RuneError && unicode.In(r, unicode.L, unicode.M, unicode.S) &&
		!unicode.In(r, unicode.Latin, unicode.Greek, unicode.Cyrillic)
}
