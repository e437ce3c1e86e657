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
	const name = "a\u202efdp.exe\x1b[2J\u0085\x7f"
	data, err := json.Marshal(map[string]string{"file_name": name})
	if err != nil {
		t.Fatal(err)
	}
	shown := Text(string(data))
	var back map[string]string
	if err := json.Unmarshal([]byte(shown), &back); err != nil {
		t.Fatalf("%s: %v", shown, err)
	}
	if back["file_name"] != name || shown != `{"file_name":"a\u202efdp.exe\u001b[2J\u0085\u007f"}` {
		t.Errorf("Text(%s) = %s, reads back %q; want the escapes and %q", data, shown, back["file_name"], name)
	}
}
