package checkm

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ingestq/ingestq/internal/redact"
)

// hashHexLen is the hex length of each supported algorithm's digest, by its
// normalised name.
var hashHexLen = map[string]int{"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}

// buildEntry turns one data line's values (in the order of fields) into an
// Entry, checking each value. A relative file URL is resolved against base,
// the manifest's own URL (nil when it has none).
func buildEntry(lineNo int, profile string, fields []field, vals []string, base *url.URL) (Entry, error) {
	e := Entry{Line: lineNo, Size: -1}
	var alg, hash, size, name string
	for i, f := range fields {
		v := vals[i]
		switch f {
		case fieldURL:
			e.URL = v
		case fieldHashAlg:
			alg = v
		case fieldHashValue:
			hash = v
		case fieldSize:
			size = v
		case fieldModified:
			e.Modified = v
		case fieldName:
			name = v
		case fieldMime:
			e.MimeType = v
		case fieldPrimaryID:
			e.PrimaryID = v
		case fieldLocalID:
			e.LocalIDs = splitLocalIDs(v)
		case fieldCreator:
			e.Who = v
		case fieldTitle:
			e.What = v
		case fieldDate:
			e.When = v
		case fieldWhere:
			e.Where = v
		}
	}
	u, relative, err := parseFileURL(e.URL, base)
	if err != nil {
		return Entry{}, err
	}
	if relative {
		e.URL = u.String() // later steps fetch it as it is; an absolute URL stays as written
	}
	if e.HashAlg, e.HashValue, err = parseHash(alg, hash); err != nil {
		return Entry{}, err
	}
	// A batch line's primary identifier becomes the object's ARK, by
	// which it is found and asked for: it must be one.
	if e.PrimaryID != "" && profile != IngestManifest {
		if err := CheckARK(e.PrimaryID); err != nil {
			return Entry{}, fmt.Errorf("primary identifier %q: %w", truncate(e.PrimaryID), err)
		}
	}
	if e.Size, err = parseSize(size); err != nil {
		return Entry{}, err
	}
	// Batch and container manifests name objects by their identifiers, so
	// only the profiles whose lines are files must have a file name.
	needName := profile == IngestManifest || profile == SingleFileBatch
	if e.FileName, err = fileName(name, u, needName); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// parseFileURL reads a file URL: an absolute URL, or a reference relative to
// base as checkm allows ("files/a.txt" beside the manifest); relative tells
// which.
func parseFileURL(raw string, base *url.URL) (u *url.URL, relative bool, err error) {
	if raw == "" {
		return nil, false, errors.New("no file URL")
	}
	// As errors name it: a depositor's URL may hold a password. Made only
	// for an error, not for each of a large manifest's lines.
	shown := func() string { return truncate(redact.Location(raw)) }
	if u, err = url.Parse(raw); err != nil {
		var ue *url.Error // it names the URL again: "parse "…": …"
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, false, fmt.Errorf("file URL %q: %w", shown(), err)
	}
	if u.Scheme == "" && u.Path == "" && u.Host == "" {
		return nil, false, fmt.Errorf("file URL %q names no file", shown())
	}
	if u.Scheme == "" {
		if base == nil {
			return nil, false, fmt.Errorf("file URL %q is not an absolute URL, and the manifest has no URL to resolve it against", shown())
		}
		return base.ResolveReference(u), true, nil
	}
	if u.Host == "" && u.Path == "" && u.Opaque == "" {
		return nil, false, fmt.Errorf("file URL %q is not an absolute URL", shown())
	}
	return u, false, nil
}

// baseURL is the manifest's source as a URL that relative file URLs resolve
// against, or nil when the source is not an absolute URL.
func baseURL(source string) *url.URL {
	u, err := url.Parse(source)
	if err != nil || !u.IsAbs() {
		return nil
	}
	return u
}

// parseHash normalises an algorithm name ("SHA-256" → "sha256") and a hex
// digest (lower case, of the algorithm's length). Both empty means no hash.
func parseHash(alg, value string) (string, string, error) {
	if alg == "" && value == "" {
		return "", "", nil
	}
	if alg == "" {
		return "", "", fmt.Errorf("hash value %q without a hash algorithm", truncate(value))
	}
	norm, ok := HashAlgorithm(alg)
	if !ok {
		return "", "", fmt.Errorf("unsupported hash algorithm %q (want %s)", truncate(alg), HashAlgorithms)
	}
	if value == "" {
		return "", "", fmt.Errorf("hash algorithm %s without a hash value", norm)
	}
	if err := CheckDigest(norm, value); err != nil {
		return "", "", fmt.Errorf("%s hash value %q %w", norm, truncate(value), err)
	}
	return norm, strings.ToLower(value), nil
}

// HashAlgorithms names the algorithms a manifest's (or a submission's)
// hash may use.
const HashAlgorithms = "md5, sha1, sha256 or sha512"

// HashAlgorithmNames lists the names of HashAlgorithms, sorted.
func HashAlgorithmNames() []string { return slices.Sorted(maps.Keys(hashHexLen)) }

// HashAlgorithm is alg's normalised name ("SHA-256" → "sha256"), and
// whether it is one of HashAlgorithms.
func HashAlgorithm(alg string) (string, bool) {
	norm := strings.ReplaceAll(strings.ToLower(alg), "-", "")
	_, ok := hashHexLen[norm]
	return norm, ok
}

// CheckDigest checks that value is a hex digest of the normalised
// algorithm alg's length; its error says what is wrong ("has 2
// characters, want 64"), without the value.
func CheckDigest(alg, value string) error {
	want, ok := hashHexLen[alg]
	switch {
	case !ok:
		return fmt.Errorf("is of an unsupported hash algorithm %q (want %s)", truncate(alg), HashAlgorithms)
	case len(value) != want:
		return fmt.Errorf("has %d characters, want %d", len(value), want)
	}
	for i := 0; i < len(value); i++ {
		if !isHex(value[i]) {
			return errors.New("is not hexadecimal")
		}
	}
	return nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parseSize reads nfo:fileSize: empty is unknown (-1), otherwise plain
// decimal digits (no sign, no spaces inside).
func parseSize(s string) (int64, error) {
	if s == "" {
		return -1, nil
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("file size %q is negative", truncate(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("file size %q is not a whole number of bytes", truncate(s))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("file size %q: %w", truncate(s), err)
	}
	return n, nil
}

// fileName cleans the given name, or derives one from the URL's last path
// segment when none is given.
func fileName(given string, u *url.URL, required bool) (string, error) {
	if given != "" {
		name, err := CleanName(given)
		if err != nil {
			return "", fmt.Errorf("file name %q: %w", truncate(given), err)
		}
		return name, nil
	}
	escaped := u.EscapedPath()
	segment := escaped[strings.LastIndexByte(escaped, '/')+1:]
	if segment != "" {
		if unescaped, err := url.PathUnescape(segment); err == nil {
			segment = unescaped
		}
	}
	if segment == "" {
		if required {
			return "", errors.New("no file name, and the URL path has no last segment to take one from")
		}
		return "", nil
	}
	name, err := CleanName(segment)
	if err != nil {
		return "", fmt.Errorf("file name %q (from the URL): %w", truncate(segment), err)
	}
	return name, nil
}

// splitLocalIDs splits mrt:localIdentifier on ";", dropping empty ids.
func splitLocalIDs(s string) []string {
	var ids []string
	for part := range strings.SplitSeq(s, ";") {
		if id := strings.TrimSpace(part); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
