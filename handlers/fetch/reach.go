package fetch

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
)

// AllowSetting names the daemon's setting that lets a depositor's URL reach
// a range that is not public, for the refusal's message.
const AllowSetting = "--fetch-allow (INGESTQ_FETCH_ALLOW)"

// specialRange is a range that is not public. A depositor's URL reaches it
// only if Config.Allow holds it; a never range not even then; a range that
// carries IPv4 addresses (an IPv6 form of them) as each address it carries.
type specialRange struct {
	p       netip.Prefix
	what    string
	never   bool                        // refused whatever Config.Allow says
	carries func([16]byte) []netip.Addr // an IPv6 form of IPv4 addresses: each is checked
}

var pfx = netip.MustParsePrefix

// thisNetwork is 0.0.0.0/8, RFC 6890's "this network": a source, never a
// destination a router forwards to.
var thisNetwork = pfx("0.0.0.0/8")

// special holds the ranges the IANA IPv4 and IPv6 Special-Purpose Address
// Registries mark not globally reachable, with multicast and the clouds'
// metadata addresses (decisions 411 and 442). The most specific range
// holding an address decides (a metadata address inside a private range,
// Teredo inside 2001::/23); an address in none is public. IPv4-mapped
// addresses are checked as the IPv4 address they are (checkAddr).
var special = []specialRange{
	// Never: the cloud's instance metadata and its credentials (link-local,
	// fd00:ec2::254 for AWS over IPv6, 100.100.100.200 for Alibaba), and
	// addresses that name no one host (Linux connects 0.0.0.0 to this one).
	{p: thisNetwork, what: "unspecified", never: true},
	{p: pfx("::/128"), what: "unspecified", never: true},
	{p: pfx("169.254.0.0/16"), what: "link-local", never: true},
	{p: pfx("fe80::/10"), what: "link-local", never: true},
	{p: pfx("100.100.100.200/32"), what: "cloud metadata", never: true},
	{p: pfx("fd00:ec2::254/128"), what: "cloud metadata", never: true},
	{p: pfx("224.0.0.0/4"), what: "multicast", never: true},
	{p: pfx("ff00::/8"), what: "multicast", never: true},
	{p: pfx("255.255.255.255/32"), what: "broadcast", never: true},

	// Only if Config.Allow holds them: an operator may number internal hosts
	// in any of them (198.18/15 and 240/4 inside data centres, documentation
	// ranges in labs).
	{p: pfx("127.0.0.0/8"), what: "loopback"},
	{p: pfx("::1/128"), what: "loopback"},
	{p: pfx("10.0.0.0/8"), what: "private"},
	{p: pfx("172.16.0.0/12"), what: "private"},
	{p: pfx("192.168.0.0/16"), what: "private"},
	{p: pfx("100.64.0.0/10"), what: "private"}, // carrier-grade NAT
	{p: pfx("fc00::/7"), what: "private"},
	{p: pfx("192.0.0.0/24"), what: "IETF protocol assignment"},
	{p: pfx("2001::/23"), what: "IETF protocol assignment"},
	{p: pfx("192.0.2.0/24"), what: "documentation"},
	{p: pfx("198.51.100.0/24"), what: "documentation"},
	{p: pfx("203.0.113.0/24"), what: "documentation"},
	{p: pfx("2001:db8::/32"), what: "documentation"},
	{p: pfx("3fff::/20"), what: "documentation"},
	{p: pfx("198.18.0.0/15"), what: "benchmarking"},
	{p: pfx("2001:2::/48"), what: "benchmarking"},
	{p: pfx("240.0.0.0/4"), what: "reserved"},
	{p: pfx("192.88.99.0/24"), what: "6to4 relay"},
	{p: pfx("100::/64"), what: "discard-only"},
	{p: pfx("100:0:0:1::/64"), what: "dummy"},
	{p: pfx("5f00::/16"), what: "segment routing (SRv6)"},

	// IPv6 forms of IPv4 addresses reach the address they carry.
	{p: pfx("::/96"), what: "IPv4-compatible", carries: last4}, // but :: and ::1, above
	{p: pfx("64:ff9b::/96"), what: "NAT64", carries: last4},
	{p: pfx("64:ff9b:1::/48"), what: "local-use NAT64", carries: localUseNAT64},
	{p: pfx("2002::/16"), what: "6to4", carries: sixToFour},
	{p: pfx("2001::/32"), what: "Teredo", carries: teredo},
}

// last4 is the IPv4 address in the last four bytes (RFC 4291, 2.5.5.1;
// NAT64 as RFC 6052 puts it under a /96 prefix).
func last4(b [16]byte) []netip.Addr { return []netip.Addr{netip.AddrFrom4([4]byte(b[12:]))} }

// localUseNAT64 is the IPv4 address a translator reads under each prefix
// length RFC 6052 allows inside 64:ff9b:1::/48: /96 (last4), /64, /56
// and /48 (which skip bits 64-71). Which length the operator's translator
// has is not known here, and under a shorter one the last four bytes are
// the suffix it ignores, which a depositor may fill with a public address:
// each reading is checked. A shorter reading inside 0.0.0.0/8 is left out:
// a /96 address's zero prefix bytes read so, and nothing forwards there.
func localUseNAT64(b [16]byte) []netip.Addr {
	readings := last4(b)
	for _, a := range []netip.Addr{
		netip.AddrFrom4([4]byte{b[9], b[10], b[11], b[12]}), // /64
		netip.AddrFrom4([4]byte{b[7], b[9], b[10], b[11]}),  // /56
		netip.AddrFrom4([4]byte{b[6], b[7], b[9], b[10]}),   // /48
	} {
		if !thisNetwork.Contains(a) {
			readings = append(readings, a)
		}
	}
	return readings
}

// sixToFour is the IPv4 address after 2002: (RFC 3056).
func sixToFour(b [16]byte) []netip.Addr { return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))} }

// teredo is the Teredo server's IPv4 address and its client's, which is
// stored inverted in the last four bytes (RFC 4380, 4).
func teredo(b [16]byte) []netip.Addr {
	client := [4]byte(b[12:])
	for i := range client {
		client[i] ^= 0xff
	}
	return []netip.Addr{netip.AddrFrom4([4]byte(b[4:8])), netip.AddrFrom4(client)}
}

// rangeOf is the most specific special range holding a, or nil if a is public.
func rangeOf(a netip.Addr) *specialRange {
	var best *specialRange
	for i, r := range special {
		if r.p.Contains(a) && (best == nil || r.p.Bits() > best.p.Bits()) {
			best = &special[i]
		}
	}
	return best
}

// reachError is a request refused for the address it would reach.
type reachError struct {
	addr netip.Addr
	what string // "loopback", "link-local", …
	ever bool   // Config.Allow may allow it
	via  string // the IPv6 form that carries addr ("6to4 2002:a00:1::"), if any
}

func (e *reachError) Error() string {
	addr := e.addr.String()
	if e.via != "" {
		addr += " (as " + e.via + ")"
	}
	article := "a"
	if strings.ContainsRune("aeiouAEIOU", rune(e.what[0])) {
		article = "an"
	}
	if e.ever {
		return fmt.Sprintf("refused: it reaches %s, %s %s address, which a depositor's URL may reach only if the daemon's %s includes it",
			addr, article, e.what, AllowSetting)
	}
	return fmt.Sprintf("refused: it reaches %s, %s %s address, which a depositor's URL may never reach", addr, article, e.what)
}

// checkAddr refuses an address outside the public internet that allow
// does not hold; the never ranges are refused even then.
func checkAddr(a netip.Addr, allow []netip.Prefix) error {
	// An IPv4-mapped address is dialled as its IPv4 address; a zoned
	// address would match no prefix.
	if e := refusal(a.Unmap().WithZone(""), allow); e != nil {
		return permanent(e)
	}
	return nil
}

// refusal is why a may not be reached, or nil if it may.
func refusal(a netip.Addr, allow []netip.Prefix) *reachError {
	r := rangeOf(a)
	switch {
	case r == nil:
		return nil
	case r.carries != nil:
		for _, ipv4 := range r.carries(a.As16()) {
			if e := refusal(ipv4, allow); e != nil {
				e.via = r.what + " " + a.String()
				return e
			}
		}
		return nil
	case r.never:
		return &reachError{addr: a, what: r.what}
	case slices.ContainsFunc(allow, func(p netip.Prefix) bool { return p.Contains(a) }):
		return nil
	}
	return &reachError{addr: a, what: r.what, ever: true}
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
