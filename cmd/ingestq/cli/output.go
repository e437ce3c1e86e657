package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ingestq/ingestq/internal/visible"
	"github.com/ingestq/ingestq/reactor/queue"
)

// field is one line of a record (show): a key and its value, in the order
// the record is printed.
type field struct {
	key   string
	value any
}

// writeFields prints a record: aligned "key: value" lines in text, or one
// JSON object that keeps the fields' order.
func (a *app) writeFields(fields []field) error {
	if a.json() {
		var buf bytes.Buffer
		buf.WriteByte('{')
		for i, f := range fields {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(f.key)
			v, err := json.Marshal(f.value)
			if err != nil {
				return fmt.Errorf("encode %s: %w", f.key, err)
			}
			buf.Write(k)
			buf.WriteByte(':')
			buf.Write(v)
		}
		buf.WriteByte('}')
		return writeIndented(a.stdout, buf.Bytes())
	}
	var flat []field
	for _, f := range fields {
		for _, g := range flatten(f.key, f.value) {
			g.key = visible.Text(g.key) // a member's name is a foreign writer's too
			flat = append(flat, g)
		}
	}
	width := 0
	for _, f := range flat {
		width = max(width, len(f.key))
	}
	for _, f := range flat {
		a.println("%-*s %s", width+1, f.key+":", textValue(f.value, "-"))
	}
	return nil
}

// flatten turns a JSON object value into one field per member, named
// key.member (recursively, members sorted), so that text output shows
// readable lines instead of JSON. Lists of plain values are joined with
// ", "; anything else stays as it is.
func flatten(key string, v any) []field {
	switch m := v.(type) {
	case nil, string, int, int64, bool, fmt.Stringer:
		return []field{{key, v}}
	case map[string]any: // its members as they are: a Stringer among them (a time, a note) keeps its text
		if len(m) == 0 {
			return []field{{key, nil}}
		}
		var out []field
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, flatten(key+"."+k, m[k])...)
		}
		return out
	}
	data, err := json.Marshal(v)
	if err != nil {
		return []field{{key, v}}
	}
	var generic any
	if json.Unmarshal(data, &generic) != nil {
		return []field{{key, v}}
	}
	switch g := generic.(type) {
	case map[string]any:
		return flatten(key, g)
	case []any:
		parts := make([]string, 0, len(g))
		for _, x := range g {
			if _, ok := x.(map[string]any); ok {
				return []field{{key, v}}
			}
			parts = append(parts, textValue(x, "null"))
		}
		return []field{{key, strings.Join(parts, ", ")}}
	case float64:
		if g == float64(int64(g)) {
			return []field{{key, int64(g)}}
		}
	}
	return []field{{key, generic}}
}

// writeJSON prints v as indented JSON.
func (a *app) writeJSON(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return writeIndented(a.stdout, data)
}

// writeIndented writes JSON as visible.Text shows it: encoding/json writes
// DEL, C1 and bidirectional controls as they are, which act on the
// terminal of whoever reads the output; escaped, the value is the same.
func writeIndented(w io.Writer, data []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(visible.Text(string(data))), "", "  "); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// textValue renders one value for text output: strings as they are, whole
// numbers as digits, booleans as yes/no, nil (and an empty string) as null,
// anything else as compact JSON.
func textValue(v any, null string) string {
	switch x := v.(type) {
	case nil:
		return null
	case string:
		if x == "" {
			return null
		}
		return x
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case fmt.Stringer:
		if s := x.String(); s != "" {
			return s
		}
		return null
	}
	data, err := json.Marshal(v)
	if err != nil || string(data) == "null" {
		return null
	}
	return string(data)
}

// table prints rows under a header, in columns.
type table struct {
	w *tabwriter.Writer
}

func (a *app) newTable(header ...string) *table {
	t := &table{w: tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row adds a line; an empty cell is shown as "-" so columns stay readable,
// a cell's controls as escapes (a tab or newline would break the columns).
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		cells[i] = visible.Text(c)
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// onceString is a string flag that refuses to be given twice: a second
// --state would otherwise silently replace the first, where the user may
// have meant both.
type onceString struct {
	p   *string
	set bool
}

func once(p *string) *onceString { return &onceString{p: p} }

func (o *onceString) String() string { return *o.p }
func (o *onceString) Type() string   { return "string" }

func (o *onceString) Set(v string) error {
	if o.set {
		return fmt.Errorf("given twice (%q, then %q): it takes one value", *o.p, v)
	}
	*o.p, o.set = v, true
	return nil
}

// Times in text output: every command prints an absolute time one way,
// queue.TextTime's (local, to the second; an event to the millisecond:
// several happen within a second), as the tables always did; -o json
// gives RFC 3339.
const textTimeMilli = "2006-01-02 15:04:05.000"

// when is t in text output; "" (shown as "-") for the zero time.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return queue.TextTime(t)
}

// whenMilli is an event's t in text output, to the millisecond.
func whenMilli(t time.Time) string { return t.Local().Format(textTimeMilli) }

// nodeTime is a time a node keeps as text (queue.NodeTime). In text it is
// shown as when shows a time, in JSON as queue.JSONTime gives it. A stamp
// that does not parse (a foreign writer's) is given as written.
type nodeTime string

func (s nodeTime) String() string { return queue.NodeText(string(s)) }

func (s nodeTime) MarshalJSON() ([]byte, error) { return json.Marshal(queue.JSONTime(string(s))) }
