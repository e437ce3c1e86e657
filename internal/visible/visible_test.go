package visible

import (
	"encoding/json"
	"testing"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"Ῥόδος ملف 文件", "Ῥόδος ملف 文件"}, // letters of any script show as they are
		{"report\u202efdp.exe", `report\u202efdp.exe`},
		{"\x1b[2Jdone", `\u001b[2Jdone`},
		{"\x1b]8;;https://evil.example\x1b\\here", `\u001b]8;;https://evil.example\u001b\here`},
		{"ok\rFAILED\n\tx", `ok\rFAILED\n\tx`},
		{"\u200e\u200f\u061c\u2066\u2069\u202a\x7f\u009b", `\u200e\u200f\u061c\u2066\u2069\u202a\u007f\u009b`},
		{"a\xffb", "a\ufffdb"},
		{`a\u202eb`, `a\u202eb`}, // already shown: the same
		// Invisible: they make two names look alike, or carry text.
		{"pay\u200bpal\u00ad.pdf", `pay\u200bpal\u00ad.pdf`},
		{"\ufeffname\u2060\u2061\u2062\u2063\u2064", `\ufeffname\u2060\u2061\u2062\u2063\u2064`},
		{"a\ufff9b\ufffac\ufffb", `a\ufff9b\ufffac\ufffb`},
		{"ok\U000E0069\U000E0067\U000E007F", `ok\udb40\udc69\udb40\udc67\udb40\udc7f`}, // tags, as JSON's surrogate pairs
		// A joiner shows as it is inside the scripts that need one, and as
		// an escape elsewhere: between Latin letters, at either end, next to
		// a space or a digit.
		{"pay\u200dpal\u200c.pdf", `pay\u200dpal\u200c.pdf`},
		{"\u200dя\u200dβ\u200c", `\u200dя\u200dβ\u200c`},
		{"a\u180eb 1\u200c2", `a\u180eb 1\u200c2`},
		{"می\u200cخواهم", "می\u200cخواهم"},                                           // Persian
		{"क्\u200dष", "क्\u200dष"},                                                   // Devanagari: virama, ZWJ
		{"ᠨᠠ\u180eᠠ", "ᠨᠠ\u180eᠠ"},                                                   // Mongolian
		{"👩\U0001F3FD\u200d💻 🏳\ufe0f\u200d🌈", "👩\U0001F3FD\u200d💻 🏳\ufe0f\u200d🌈"},   // emoji sequences
		{"🏴\U000E0067\U000E0062\U000E007F", `🏴\udb40\udc67\udb40\udc62\udb40\udc7f`}, // a flag's tags too
	} {
		got := Text(c.in)
		if got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
		if Text(got) != got {
			t.Errorf("Text(%q) = %q, not itself", got, Text(got))
		}
	}
}

// Text of the JSON encoding/json writes is JSON of the same value: -o json
// shows its escapes and reads back as the name.
func TestTextOfJSON(t *testing.T) {
	const name = "a\u202efdp.exe\x1b[2J\u0085\x7f\u200b\U000E0041"
	data, err := json.Marshal(map[string]string{"file_name": name})
	if err != nil {
		t.Fatal(err)
	}
	shown := Text(string(data))
	var back map[string]string
	if err := json.Unmarshal([]byte(shown), &back); err != nil {
		t.Fatalf("%s: %v", shown, err)
	}
	if back["file_name"] != name || shown != `{"file_name":"a\u202efdp.exe\u001b[2J\u0085\u007f\u200b\udb40\udc41"}` {
		t.Errorf("Text(%s) = %s, reads back %q; want the escapes and %q", data, shown, back["file_name"], name)
	}
}
