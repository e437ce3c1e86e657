package handlers

import (
	"strings"
	"testing"
)

// A download's wait names its depositor's servers in the host node, never
// a URL's secrets. A password holding "?", "/" or "#" after digits is read
// by url.Parse as the host's port (https://user:12?ss@host/f has host
// "user:12"): the node showed the user name and the password's start,
// which every log masks (redact). Such a URL's server goes unnamed.
func TestDepositorServersShowNoSecretOfAURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://example.org/a.txt", "the depositor's server example.org"},
		{"https://user:secret@example.org/a.txt?sig=abc", "the depositor's server example.org"},
		{"https://depositor:12?ss@example.org/a.txt", "the depositor's files"},
		{"https://depositor:1234/5678@example.org/a.txt", "the depositor's files"},
		{"https://depositor:12#ss@example.org/a.txt", "the depositor's files"},
	} {
		got := depositorServers([]file{{URL: c.url}})
		if got != c.want || strings.Contains(got, "depositor:") || strings.Contains(got, "12") {
			t.Errorf("%s: says %q; want %q", c.url, got, c.want)
		}
	}
}
