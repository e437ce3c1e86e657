package fetch

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
)

// AllowSetting names the daemon's setting that lets a depositor's URL reach
// a loopback or private range, for the refusal's message.
const AllowSetting = "--fetch-allow (INGESTQ_FETCH_ALLOW)"

// never are the ranges no depositor's URL may reach, whatever Config.Allow
// says: the cloud's instance metadata (and its credentials) answer on
// link-local, fd00:ec2::254 (AWS over IPv6) and 100.100.100.200 (Alibaba).
// 0.0.0.0/8 is here because Linux connects 0.0.0.0 to this host.
var never = []struct {
	p    netip.Prefix
	what string
}{
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// cgnat is the carrier-grade NAT range, private like RFC 1918's.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// nat64 embeds an IPv4 address in its last four bytes.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// reachError is a request refused for the address it would reach.
type reachError struct {
	addr netip.Addr
	what string // "loopback", "link-local", …
	ever bool   // Config.Allow may allow it
}

func (e *reachError) Error() string {
	if e.ever {
		return fmt.Sprintf("refused: it reaches %s, a %s address, which a depositor's URL may reach only if the daemon's %s includes it",
			e.addr, e.what, AllowSetting)
	}
	return fmt.Sprintf("refused: it reaches %s, a %s address, which a depositor's URL may never reach", e.addr, e.what)
}

// checkAddr refuses an address outside the public internet that allow
// does not hold; never's ranges are refused even then.
func checkAddr(a netip.Addr, allow []netip.Prefix) error {
	a = a.Unmap().WithZone("") // a zoned address matches no prefix
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, n := range never {
		if n.p.Contains(a) {
			return permanent(&reachError{addr: a, what: n.what})
		}
	}
	what := ""
	switch {
	case a.IsLoopback():
		what = "loopback"
	case a.IsPrivate(), cgnat.Contains(a):
		what = "private"
	default:
		return nil
	}
	for _, p := range allow {
		if p.Contains(a) {
			return nil
		}
	}
	return permanent(&reachError{addr: a, what: what, ever: true})
}

// guardDialer has every connection check the address it dials: the one
// a name resolved to, on every request, redirect and retry, so that a
// name that resolves to a refused address (DNS rebinding) is refused too.
func guardDialer(d *net.Dialer, allow []netip.Prefix) {
	d.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return permanent(fmt.Errorf("refused: cannot tell the address of %s", address))
		}
		return checkAddr(ap.Addr(), allow)
	}
}

// checkLiteral refuses a request whose URL names a refused address: through
// a proxy (HTTP_PROXY) the dial reaches the proxy, not that address, so the
// dial's check cannot see it.
func checkLiteral(req *http.Request, allow []netip.Prefix) error {
	a, err := netip.ParseAddr(req.URL.Hostname())
	if err != nil {
		return nil // a name: the dial checks what it resolves to
	}
	return checkAddr(a, allow)
}

// Loopback is this host's range, where a one-host trial (ingestq demo, the
// tests) serves its payloads.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// ParseAllow reads a comma-separated list of ranges (CIDR) and addresses
// a depositor's URL may reach besides the public ones.
func ParseAllow(list string) ([]netip.Prefix, error) {
	var allow []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return nil, fmt.Errorf("%q is neither a range (CIDR, as 10.0.0.0/8) nor an address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		allow = append(allow, p.Masked())
	}
	return allow, nil
}
