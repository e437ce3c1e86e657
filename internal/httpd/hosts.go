package httpd

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// The Host check: the server answers a request only if its Host is a name
// the server is reached by. A page on a name an attacker points at the
// server's address (DNS rebinding) is same-origin with it in the browser of
// anyone on the network, and could read what needs no token (a job's
// hand-off files, /metrics, /debug/pprof); its requests carry the
// attacker's name as Host, which is never an IP literal nor under
// localhost.

// refusalWindow and refusalHosts bound the log of refusals: the first
// refusal of each Host in a window is logged, for at most refusalHosts
// Hosts, so that a scanner sending Host after Host cannot flood the log.
const (
	refusalWindow = time.Hour
	refusalHosts  = 16
)

// shownHost is how much of a Host a refusal shows (a DNS name has at most
// 253 bytes): the header may be as long as the server takes headers.
const shownHost = 300

// hostCheck is which Hosts the server answers to. It always answers IP
// literals, localhost and the names under it (RFC 6761: resolvers and
// browsers never ask DNS for them), and no Host at all (an HTTP/1.0
// request, which no browser sends).
type hostCheck struct {
	names    map[string]bool // as hostName gives them
	suffixes []string        // ".example.org" of *.example.org
	any      bool            // "*": every Host, the check off
	setting  string          // what a refusal says to add a name to
}

// newHostCheck makes the check of names (a name, *.example.org for every
// name under example.org, or * for every Host).
func newHostCheck(setting string, names ...string) *hostCheck {
	c := &hostCheck{names: map[string]bool{}, setting: setting}
	for _, n := range names {
		n = strings.TrimSuffix(strings.ToLower(n), ".")
		switch {
		case n == "*":
			c.any = true
		case strings.HasPrefix(n, "*."):
			c.suffixes = append(c.suffixes, n[1:])
		case n != "":
			c.names[n] = true
		}
	}
	return c
}

func (c *hostCheck) answers(host string) bool {
	if c.any || host == "" {
		return true
	}
	name := hostName(host)
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") || c.names[name] {
		return true
	}
	for _, s := range c.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// hostName is the name of a Host header: its port, an IPv6 literal's
// brackets and a trailing dot taken off, in lower case. The port is not
// checked: a proxy or a forwarded port may reach the server on another.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// ownNames are the names the server answers to besides IP literals and
// localhost: the machine's name and its first label (the short name, which
// the site's own resolver expands, never an attacker's DNS), and the host
// of the listen address when it is a name.
func ownNames(hostname, listen string) []string {
	names := []string{hostname}
	if short, _, ok := strings.Cut(hostname, "."); ok {
		names = append(names, short)
	}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" && net.ParseIP(host) == nil {
		names = append(names, host)
	}
	return names
}

// ParseHosts reads a comma-separated list of further names a server
// answers to: a name (proxy.example.org), *.example.org for every name
// under example.org, or * for every Host (no check: DNS rebinding reaches
// the server again). IP literals and localhost need no naming.
func ParseHosts(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if n != "*" && !isDNSName(strings.TrimPrefix(n, "*.")) {
			return nil, fmt.Errorf("%q: want a host name (proxy.example.org), *.example.org for every name under example.org, "+
				"or * for every Host; no scheme, port or path", n)
		}
		names = append(names, n)
	}
	return names, nil
}

// isDNSName tells whether s is a host name: dot-separated labels of
// letters, digits, '-' and '_', with or without a trailing dot.
func isDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return false
		}
	}
	return true
}

// AnswerTo has the server answer to names too (as ParseHosts reads them;
// the host of the URL other hosts reach it at among them), besides those
// it always answers to. setting is what a refusal says to add a name to.
func (s *Server) AnswerTo(names []string, setting string) {
	s.hosts.Store(newHostCheck(setting, slices.Concat(names, s.own)...))
}

// refuse answers a request for a Host the server does not answer to with
// 421 Misdirected Request, naming the Host and the setting to add it to,
// and logs it as refusalLog allows.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, c *hostCheck) {
	shown := r.Host
	if len(shown) > shownHost {
		shown = shown[:shownHost] + "…"
	}
	if logged, last := s.refused.first(hostName(r.Host), time.Now()); logged {
		msg := "httpd: refused a request for a Host this server does not answer to (421): a page on a name pointed at " +
			"this server (DNS rebinding), or a name to add to " + c.setting + "; that Host is not logged again within the hour"
		if last {
			msg += fmt.Sprintf(", nor is any other (%d were)", refusalHosts)
		}
		s.log.Warn(msg, "host", shown, "remote", r.RemoteAddr, "path", r.URL.Path)
	}
	http.Error(w, fmt.Sprintf("misdirected: this server does not answer to Host %q; add the name to %s", shown, c.setting),
		http.StatusMisdirectedRequest)
}

// refusalLog tells which refusals to log: each Host's first in a window,
// of at most refusalHosts Hosts a window.
type refusalLog struct {
	mu    sync.Mutex
	since time.Time
	hosts map[string]bool
}

// first tells whether to log a refusal of host now, and whether it is the
// last one logged in this window.
func (l *refusalLog) first(host string, now time.Time) (logged, last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hosts == nil || now.Sub(l.since) >= refusalWindow {
		l.hosts, l.since = map[string]bool{}, now
	}
	if l.hosts[host] || len(l.hosts) >= refusalHosts {
		return false, false
	}
	l.hosts[host] = true
	return true, len(l.hosts) == refusalHosts
}
