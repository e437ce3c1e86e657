package checkm

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ingestq/ingestq/internal/redact"
)

// The four Merritt manifest profiles: the last path segment of the
// #%profile URL.
const (
	IngestManifest  = "mrt-ingest-manifest"
	BatchManifest   = "mrt-batch-manifest"
	SingleFileBatch = "mrt-single-file-batch-manifest"
	ContainerBatch  = "mrt-container-batch-manifest"
)

// Entry is one data line: a file of an object (IngestManifest) or an object
// of a batch (the other profiles).
type Entry struct {
	Line      int    // 1-based line number in the source
	URL       string // absolute: as written, or resolved against the manifest's URL
	HashAlg   string // "", md5, sha1, sha256, sha512
	HashValue string // lower-case hex, "" when none
	Size      int64  // -1 when unknown
	Modified  string // nfo:fileLastModified, as written
	FileName  string // cleaned relative path; "" only in batch and container profiles when the URL gives none
	MimeType  string

	PrimaryID              string   // batch profiles: mrt:primaryIdentifier
	LocalIDs               []string // mrt:localIdentifier split on ";"
	Who, What, When, Where string   // mrt:creator, mrt:title, mrt:date, mrt:where (ERC)
}

// Manifest is a parsed manifest.
type Manifest struct {
	Source  string   // what it was read from, for messages (a URL or path)
	Profile string   // one of the profile constants
	Fields  []string // the column names in use: #%fields as written, or the checkm default
	Entries []Entry
}

// Limits bound what Parse accepts. Zero or negative fields take the default.
type Limits struct {
	MaxLineBytes int   // default 64 KiB: a longer line is an error naming the line
	MaxEntries   int   // default 100_000
	MaxBytes     int64 // whole manifest, default 256 MiB
}

const (
	defaultMaxLineBytes = 64 << 10
	defaultMaxEntries   = 100_000
	defaultMaxBytes     = 256 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = defaultMaxLineBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = defaultMaxEntries
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = defaultMaxBytes
	}
	return l
}

// Errors that callers may want to tell apart with errors.Is.
var (
	ErrTruncated  = errors.New("manifest truncated: no #%eof")
	ErrNoEntries  = errors.New("no entries")
	ErrLimit      = errors.New("limit passed")
	ErrUnsafeName = errors.New("unsafe file name")
)

// LineError is an error tied to a line of a manifest.
type LineError struct {
	Source string
	Line   int
	Err    error
}

// Error names Source as messages show it: a manifest's URL may hold a
// password.
func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %v", redact.Location(e.Source), e.Line, e.Err)
}
func (e *LineError) Unwrap() error { return e.Err }

var (
	utf8BOM     = []byte("\ufeff")
	checkmMagic = []byte("#%checkm")
)

// Sniff tells whether the first bytes of a payload look like a checkm
// manifest: "#%checkm", after an optional byte-order mark and blank space.
func Sniff(head []byte) bool {
	head = bytes.TrimPrefix(head, utf8BOM)
	head = bytes.TrimLeft(head, " \t\r\n")
	return len(head) >= len(checkmMagic) && bytes.EqualFold(head[:len(checkmMagic)], checkmMagic)
}
