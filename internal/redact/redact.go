// Package redact makes a configured location (a storage target, an
// inventory, a NATS server, a callback: Location) or a depositor's URL (a
// payload or manifest URL, among text that is no URL: URLs) safe to show
// in a log line, an error, an API answer or a command's output: each
// password, token and secret in it becomes Mask, and everything else stays
// as it was written, so that an operator can still tell which place it
// names.
//
// It reads the text itself rather than trusting url.Parse, which refuses
// many URLs a person writes (a space or a "%" in a password, a control
// character); those are the very ones an error message repeats.
package redact

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Mask is what a secret is shown as: url.URL.Redacted's, pgx's and
// go-retryablehttp's mask, so that one form reads the same everywhere.
const Mask = "xxxxx"

// Location returns s with its secrets masked. s may be
//   - a URL: the password of its userinfo (all of it when the user is a
//     NATS token, nats://TOKEN@host) and the value of each query parameter
//     named like a secret (password, sslpassword, secret_key, token, sig, …);
//   - a comma-separated list of such URLs and folders (--storage, --nats);
//   - a libpq key=value connection string (host=db password=secret), its
//     password's value masked however it is quoted;
//   - text url.Parse refuses that still has the shape scheme://user:pass@…:
//     everything between the user's colon and the last "@" is masked.
//
// Anything else (a folder, host:port) is returned as it is.
func Location(s string) string {
	if keyValue.MatchString(s) {
		return connString(s)
	}
	return URLs(s)
}

// URLs is Location for a URL, or a comma-separated list of URLs and
// folders, alone: text of any other form, a libpq key=value string too,
// is returned as it is. It is for a value a depositor wrote, which may be
// a URL or any text (a title "Key = Largo", a file name "pass=1.txt"),
// where Location's key=value form would mask a word that is no secret.
func URLs(s string) string {
	parts := splitList(s)
	for i, p := range parts {
		parts[i] = oneURL(p)
	}
	return strings.Join(parts, ",")
}

// In returns text with each of locations in it, as written or as %q quotes
// it (url.Error does), replaced by its Location; each member of a list is
// replaced too, as an error names one. It is for the text of an error a
// library wrote around a location.
func In(text string, locations ...string) string {
	for _, l := range locations {
		for _, p := range append([]string{l}, splitList(l)...) {
			p = strings.TrimSpace(p)
			shown := Location(p)
			if p == "" || shown == p {
				continue
			}
			text = strings.ReplaceAll(text, p, shown)
			quoted, shownQuoted := strconv.Quote(p), strconv.Quote(shown)
			text = strings.ReplaceAll(text, quoted[1:len(quoted)-1], shownQuoted[1:len(shownQuoted)-1])
		}
	}
	return text
}

// keyValue is the start of a libpq connection string: a keyword, "=".
var keyValue = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// listItem is where a list's next member starts: a URL's scheme or a
// folder. A comma elsewhere belongs to the member before it (a password's,
// a query's), so "nats://u:p,ss@h" stays one URL.
var listItem = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9+.-]*://|[/~.]|file:)`)

// splitList cuts s at each comma a list member follows.
func splitList(s string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && listItem.MatchString(s[i+1:]) {
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// oneURL masks the secrets of one URL, working on the text as written.
func oneURL(s string) string {
	schemeEnd := strings.Index(s, "://")
	if schemeEnd < 0 || !scheme.MatchString(strings.TrimLeft(s[:schemeEnd], " \t")) {
		return s
	}
	head, rest := s[:schemeEnd+3], s[schemeEnd+3:]
	// The userinfo ends at the authority's last "@". Where url.Parse
	// finds a user, the authority ends at the first "/", "?" or "#".
	// Elsewhere a password may hold any of them, and url.Parse may have
	// read its start as a port ("u:12?ss@h", "u:#ss@h") or refused the
	// text: the last "@" of all ends it. A "@" in such a URL's path then
	// hides more than a password (https://h:8443/a@b shows as
	// https://h:xxxxx@b), which is safe.
	authorityEnd := len(rest)
	if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			authorityEnd = i
		}
	}
	var b strings.Builder
	b.WriteString(head)
	if at := strings.LastIndex(rest[:authorityEnd], "@"); at >= 0 {
		user, _, hasPassword := strings.Cut(rest[:at], ":")
		switch {
		case hasPassword:
			b.WriteString(user + ":" + Mask)
		case tokenSchemes[strings.ToLower(strings.TrimSpace(s[:schemeEnd]))] && !strings.ContainsAny(user, "/?#"):
			b.WriteString(Mask)
		default:
			b.WriteString(user)
		}
		b.WriteString("@")
		rest = rest[at+1:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		b.WriteString(rest[:q+1])
		rest = query(rest[q+1:])
	}
	b.WriteString(rest)
	return b.String()
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// tokenSchemes are those whose userinfo without a colon is a token
// (nats.go reads nats://TOKEN@host so).
var tokenSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// query masks the value of each parameter of raw (a URL's query, with its
// fragment if any) whose name is a secret's; "&" and ";" separate them.
func query(raw string) string {
	fragment := ""
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw, fragment = raw[:i], raw[i:]
	}
	var b strings.Builder
	for raw != "" {
		param, sep := raw, ""
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			param, sep = raw[:i], raw[i:i+1]
		}
		raw = raw[len(param)+len(sep):]
		if name, _, hasValue := strings.Cut(param, "="); hasValue && secretName(name) {
			param = name + "=" + Mask
		}
		b.WriteString(param + sep)
	}
	return b.String() + fragment
}

// secretName reports whether a parameter or keyword named name holds a
// secret: a password, a token, a secret key, a signature (a presigned
// URL's, a SAS's), an API key.
func secretName(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	n := strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(strings.TrimSpace(name)))
	for _, word := range []string{"password", "passwd", "secret", "token", "signature", "apikey", "privatekey"} {
		if strings.Contains(n, word) {
			return true
		}
	}
	switch n {
	case "pwd", "pass", "sig", "key", "auth", "credentials":
		return true
	}
	return false
}

// connString masks the values of a libpq key=value connection string's
// secrets (password, sslpassword), however each is written: bare, with
// backslash escapes, or in single quotes; an unclosed quote hides the
// rest. A word that is no keyword=value (libpq refuses the string) is kept,
// and what follows it read on.
func connString(s string) string {
	var b strings.Builder
	for {
		lead := len(s) - len(strings.TrimLeft(s, spaces))
		b.WriteString(s[:lead])
		if s = s[lead:]; s == "" {
			return b.String()
		}
		kv := keyValue.FindString(s)
		b.WriteString(kv)
		s = s[len(kv):]
		lead = len(s) - len(strings.TrimLeft(s, spaces))
		b.WriteString(s[:lead])
		s = s[lead:]
		value := valueLen(s)
		if kv == "" { // a word, up to a space, whatever it holds
			if value = strings.IndexAny(s, spaces); value < 0 {
				value = len(s)
			}
		}
		if kv != "" && secretName(strings.TrimSpace(strings.TrimSuffix(kv, "="))) {
			b.WriteString(Mask)
		} else {
			b.WriteString(s[:value])
		}
		s = s[value:]
	}
}

// spaces are those libpq skips around a keyword and a value.
const spaces = " \t\n\r\f\v"

// valueLen is the length of the value s starts with, as libpq reads it.
func valueLen(s string) int {
	quoted := strings.HasPrefix(s, "'")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++ // the next byte is the value's, whatever it is
		case quoted && c == '\'' && i > 0:
			return i + 1
		case !quoted && strings.IndexByte(spaces, c) >= 0:
			return i
		}
	}
	return len(s)
}
