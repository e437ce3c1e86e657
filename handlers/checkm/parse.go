package checkm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
)

// Parse reads a manifest. Every error is a *LineError naming source and
// line. When source is an absolute URL, relative file URLs are resolved
// against it. Parse reads at most lim.MaxBytes (+1) bytes from r.
func Parse(r io.Reader, source string, lim Limits) (*Manifest, error) {
	lim = lim.withDefaults()
	// One byte past the limit tells a manifest at it from a longer one. None
	// past the largest limit, where it wrapped: nothing read, every manifest
	// "empty input".
	counted := &countingReader{r: io.LimitReader(r, lim.MaxBytes+min(1, math.MaxInt64-lim.MaxBytes))}
	sc := bufio.NewScanner(counted)
	// Room for the line, its "\r\n", and one byte more so an overlong line
	// is told apart from one that is exactly at the limit; none past the
	// largest, as above, where the buffer's make panicked.
	room := lim.MaxLineBytes + min(3, math.MaxInt-lim.MaxLineBytes)
	sc.Buffer(make([]byte, 0, min(4096, room)), room)

	p := &parser{m: &Manifest{Source: source}, base: baseURL(source), lim: lim, prefixes: map[string]string{}}
	lineNo := 0
	for sc.Scan() {
		lineNo++
		if counted.n > lim.MaxBytes {
			return nil, p.errorf(lineNo, "%w: manifest is larger than %d bytes", ErrLimit, lim.MaxBytes)
		}
		line := sc.Text()
		if len(line) > lim.MaxLineBytes {
			return nil, p.errorf(lineNo, "%w: line is longer than %d bytes", ErrLimit, lim.MaxLineBytes)
		}
		if lineNo == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if err := p.line(lineNo, line); err != nil {
			return nil, &LineError{Source: source, Line: lineNo, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, p.errorf(lineNo+1, "%w: line is longer than %d bytes", ErrLimit, lim.MaxLineBytes)
		}
		return nil, p.errorf(lineNo+1, "read: %w", err)
	}
	return p.finish()
}

// parser holds what the lines read so far have declared.
type parser struct {
	m        *Manifest
	base     *url.URL // the manifest's URL, for relative file URLs; nil if none
	lim      Limits
	prefixes map[string]string // lower-case "prefix:" → namespace URI
	fields   []field           // nil until #%fields or the first entry

	headerLine, profileLine, fieldsLine, eofLine int
	lastLine                                     int // last non-blank line
	unique                                       uniqueness
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return &LineError{Source: p.m.Source, Line: line, Err: fmt.Errorf(format, args...)}
}

// line handles one line of input.
func (p *parser) line(n int, line string) error {
	text := strings.TrimSpace(line)
	if text == "" {
		return nil
	}
	if p.eofLine != 0 {
		return fmt.Errorf("data after #%%eof (line %d)", p.eofLine)
	}
	p.lastLine = n
	if p.headerLine == 0 {
		if !strings.EqualFold(text, "#%checkm_0.7") {
			return fmt.Errorf("not a checkm 0.7 manifest: the first line must be #%%checkm_0.7, not %q", truncate(text))
		}
		p.headerLine = n
		return nil
	}
	if strings.HasPrefix(text, "#%") {
		return p.directive(n, text)
	}
	if strings.HasPrefix(text, "#") {
		return nil // a comment
	}
	return p.entry(n, text)
}

// directive handles a "#%name | value | ..." line.
func (p *parser) directive(n int, text string) error {
	parts := strings.Split(text, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	name := strings.ToLower(strings.TrimPrefix(parts[0], "#%"))
	declares := name == "profile" || name == "prefix" || name == "fields"
	if declares && len(p.m.Entries) > 0 {
		return fmt.Errorf("#%%%s after the first entry (line %d); it must come before", name, p.m.Entries[0].Line)
	}
	switch name {
	case "checkm_0.7":
		return fmt.Errorf("second #%%checkm_0.7 line (the first is line %d)", p.headerLine)
	case "eof":
		p.eofLine = n
	case "profile":
		if p.profileLine != 0 {
			return fmt.Errorf("second #%%profile line (the first is line %d)", p.profileLine)
		}
		if len(parts) != 2 || parts[1] == "" {
			return errors.New("#%profile needs one value: the profile URL")
		}
		profile, err := profileName(parts[1])
		if err != nil {
			return err
		}
		p.m.Profile, p.profileLine = profile, n
	case "prefix":
		if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
			return errors.New("#%prefix needs two values: the prefix and its namespace URI")
		}
		p.prefixes[strings.ToLower(strings.TrimSuffix(parts[1], ":"))+":"] = parts[2]
	case "fields":
		if p.fieldsLine != 0 {
			return fmt.Errorf("second #%%fields line (the first is line %d)", p.fieldsLine)
		}
		fields, err := columnMap(parts[1:], p.prefixes)
		if err != nil {
			return err
		}
		p.fields, p.fieldsLine, p.m.Fields = fields, n, parts[1:]
	}
	// Other directives are extensions this reader does not need.
	return nil
}

// profileName takes the profile from a #%profile value: the URL's last path
// segment, or the bare name.
func profileName(value string) (string, error) {
	name := strings.TrimRight(value, "/")
	name = name[strings.LastIndexByte(name, '/')+1:]
	switch strings.ToLower(name) {
	case IngestManifest, BatchManifest, SingleFileBatch, ContainerBatch:
		return strings.ToLower(name), nil
	}
	return "", fmt.Errorf("unknown profile %q (want %s, %s, %s or %s)",
		truncate(value), IngestManifest, BatchManifest, SingleFileBatch, ContainerBatch)
}

// entry handles a data line.
func (p *parser) entry(n int, text string) error {
	if p.profileLine == 0 {
		return errors.New("entry before any #%profile line")
	}
	if p.fields == nil {
		p.fields, _ = columnMap(defaultFieldNames, nil)
		p.m.Fields = defaultFieldNames
	}
	if len(p.m.Entries) >= p.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrLimit, p.lim.MaxEntries)
	}
	vals, given, err := splitColumns(text, len(p.fields))
	if err != nil {
		return err
	}
	e, err := buildEntry(n, p.m.Profile, p.fields, vals, p.base)
	if given > 1 && given < len(p.fields) {
		// A line may leave out trailing columns, but one that left out a
		// column in the middle has its values read in the wrong columns:
		// say how it was read, where "unsupported hash algorithm "a.txt""
		// alone hid it. A date with no digit is such a shifted value.
		if err == nil && e.Modified != "" && !strings.ContainsAny(e.Modified, "0123456789") {
			err = fmt.Errorf("nfo:fileLastModified %q is no date or time", truncate(e.Modified))
		}
		if err != nil {
			return fmt.Errorf("line has %d fields where the %d columns of %s are %s; read as the first %d of them: %w",
				given, len(p.fields), p.columnsSource(), strings.Join(p.m.Fields, " | "), given, err)
		}
	}
	if err != nil {
		return err
	}
	if err := p.unique.add(p.m.Profile, &e); err != nil {
		return err
	}
	p.m.Entries = append(p.m.Entries, e)
	return nil
}

// columnsSource says where the columns come from, for messages.
func (p *parser) columnsSource() string {
	if p.fieldsLine == 0 {
		return "checkm's default order (the manifest has no #%fields)"
	}
	return fmt.Sprintf("#%%fields on line %d", p.fieldsLine)
}

// finish checks what can only be checked at the end of input.
func (p *parser) finish() (*Manifest, error) {
	switch {
	case p.headerLine == 0:
		return nil, p.errorf(1, "empty input: no #%%checkm_0.7 line")
	case p.eofLine == 0:
		return nil, p.errorf(p.lastLine, "%w after this line", ErrTruncated)
	case len(p.m.Entries) == 0:
		return nil, p.errorf(p.eofLine, "%w before #%%eof", ErrNoEntries)
	}
	return p.m, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
