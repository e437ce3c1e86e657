package fetch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestReachRanges(t *testing.T) {
	all := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	cases := []struct {
		addr  string
		allow []netip.Prefix
		want  string // "": reached
	}{
		{"93.184.215.14", nil, ""},
		{"2606:4700::1111", nil, ""},
		{"127.0.0.1", nil, "loopback"},
		{"::1", nil, "loopback"},
		{"127.0.0.1", Loopback, ""},
		{"10.1.2.3", nil, "private"},
		{"10.1.2.3", all, ""},
		{"172.16.0.1", nil, "private"},
		{"192.168.1.1", nil, "private"},
		{"fd12::1", nil, "private"},
		{"100.64.0.1", nil, "private"},
		{"169.254.169.254", all, "link-local"},
		{"::ffff:169.254.169.254", all, "link-local"},
		{"64:ff9b::a9fe:a9fe", all, "link-local"}, // NAT64 of 169.254.169.254
		{"fe80::1%eth0", all, "link-local"},
		{"fd00:ec2::254", all, "cloud metadata"},
		{"100.100.100.200", all, "cloud metadata"},
		{"0.0.0.0", all, "unspecified"},
		{"::", all, "unspecified"},
		{"255.255.255.255", all, "broadcast"},
		{"224.0.0.1", all, "multicast"},
		{"ff02::1", all, "multicast"},

		// The other ranges the IANA registries mark not globally reachable.
		{"198.18.0.1", nil, "benchmarking"},
		{"198.19.255.254", nil, "benchmarking"},
		{"198.20.0.1", nil, ""},
		{"2001:2::1", nil, "benchmarking"},
		{"240.0.0.1", nil, "reserved"},
		{"255.255.255.254", all, ""}, // reserved, allowed: only 255.255.255.255 is broadcast
		{"192.0.0.1", nil, "IETF protocol assignment"},
		{"192.0.0.9", nil, "IETF protocol assignment"}, // PCP anycast: refused with its block
		{"2001:20::1", nil, "IETF protocol assignment"},
		{"192.0.2.1", nil, "documentation"},
		{"198.51.100.1", nil, "documentation"},
		{"203.0.113.1", nil, "documentation"},
		{"2001:db8::1", nil, "documentation"},
		{"3fff::1", nil, "documentation"},
		{"192.88.99.1", nil, "6to4 relay"},
		{"100::1", nil, "discard-only"},
		{"100:0:0:1::1", nil, "dummy"},
		{"5f00::1", nil, "segment routing (SRv6)"},
		{"198.18.0.1", []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}, ""},
		{"2001:db8::1", all, ""},
		{"192.31.196.1", nil, ""},    // AS112, globally reachable
		{"192.52.193.1", nil, ""},    // AMT, globally reachable
		{"2620:4f:8000::1", nil, ""}, // AS112, globally reachable

		// IPv6 forms of an IPv4 address are checked as that address.
		{"::a00:1", nil, "private"}, // IPv4-compatible 10.0.0.1
		{"::7f00:1", Loopback, ""},  // IPv4-compatible 127.0.0.1
		{"::1", all, ""},            // loopback, not IPv4-compatible 0.0.0.1
		{"::2", all, "unspecified"}, // IPv4-compatible 0.0.0.2
		{"2002:a01:203::1", nil, "private"},
		{"2002:a01:203::1", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{"2002:a01:203::1", all, ""},
		{"2002:a9fe:a9fe::", all, "link-local"},
		{"2002:5db8:d70e::1", nil, ""},                              // 93.184.215.14
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", nil, "private"},    // Teredo client 10.0.0.1
		{"2001:0:a00:1:8000:63bf:a247:28f1", nil, "private"},        // Teredo server 10.0.0.1
		{"2001:0:4136:e378:8000:63bf:a247:28f1", nil, ""},           // server 65.54.227.120, client 93.184.215.14
		{"2001:0:4136:e378:8000:63bf:5601:5601", all, "link-local"}, // client 169.254.169.254, inverted
		{"64:ff9b:1::a00:1", nil, "private"},
		{"64:ff9b:1:2:3:4:a9fe:a9fe", all, "link-local"},
		{"64:ff9b:1::5db8:d70e", nil, ""},
		// A local-use NAT64 prefix may be a /48, /56 or /64 too, whose
		// translator ignores the bytes after the IPv4 address: each reading
		// is checked, whatever the last four bytes say (93.184.215.14 or
		// 1.184.215.14 here).
		{"64:ff9b:1:a0a:a:a00:5db8:d70e", nil, "private"},     // as a /48: 10.10.10.10
		{"64:ff9b:1:a9:fe:a9fe:5db8:d70e", all, "link-local"}, // as a /56: 169.254.169.254
		{"64:ff9b:1:0:7f:0:1b8:d70e", nil, "loopback"},        // as a /64: 127.0.0.1
		{"64:ff9b:1:0:7f:0:1b8:d70e", Loopback, ""},
		{"64:ff9b:1:abcd::5db8:d70e", nil, ""},          // a /96 of the operator's: 171.205.0.0 and 205.0.0.0 as a /48 and /56
		{"64:ff9b:1:5db8:d7:e00::", all, "unspecified"}, // 93.184.215.14 under a /48: its /96 reading is 0.0.0.0
	}
	for _, tc := range cases {
		err := checkAddr(netip.MustParseAddr(tc.addr), tc.allow)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s (allow %v): %v; want it reached", tc.addr, tc.allow, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), " "+tc.want+" address, which") || !Permanent(err)):
			t.Errorf("%s (allow %v): %v; want a permanent refusal of a %s address", tc.addr, tc.allow, err, tc.want)
		}
	}
}

// reachClient is a fast client with the default reach, or allow's.
func reachClient(allow ...netip.Prefix) *Client {
	return New(Config{Attempts: 3, MinWait: 1, MaxWait: 1, Allow: allow})
}

func TestReachRefusesLoopbackByDefault(t *testing.T) {
	o := newOrigin(t, []byte("secret"), nil)
	_, err := reachClient().Fetch(context.Background(), o.file(), 100)
	msg := "fetch " + o.file() + ": refused: it reaches 127.0.0.1, a loopback address, which a depositor's URL may reach only if the daemon's " +
		AllowSetting + " includes it"
	if err == nil || err.Error() != msg || !Permanent(err) {
		t.Fatalf("Fetch = %v;\nwant the permanent error %q", err, msg)
	}
	if n := len(o.requests()); n != 0 {
		t.Fatalf("the server got %d requests; want none", n)
	}
	if got, err := reachClient(Loopback...).Fetch(context.Background(), o.file(), 100); err != nil || string(got) != "secret" {
		t.Fatalf("Fetch with loopback allowed = %q, %v; want the file", got, err)
	}
}

// A name is checked at the address it resolves to, when it is dialled: no
// look-up before the request can be rebound after it.
func TestReachChecksTheAddressDialled(t *testing.T) {
	o := newOrigin(t, []byte("secret"), nil)
	u := strings.Replace(o.file(), "127.0.0.1", "localhost", 1)
	_, err := reachClient().Download(context.Background(), u, dest(t), Want{Size: -1}, nil)
	if err == nil || !strings.Contains(err.Error(), "a loopback address") || !strings.Contains(err.Error(), u) || !Permanent(err) {
		t.Fatalf("Download(%s) = %v; want a permanent refusal naming it and a loopback address", u, err)
	}
	if n := len(o.requests()); n != 0 {
		t.Fatalf("the server got %d requests; want none", n)
	}
}

func TestReachRefusesARedirect(t *testing.T) {
	for _, to := range []string{"http://169.254.169.254/latest/meta-data/iam/security-credentials/", "http://[fd00:ec2::254]/"} {
		o := newOrigin(t, nil, func(n int, w http.ResponseWriter, r *http.Request) bool {
			http.Redirect(w, r, to, http.StatusFound)
			return true
		})
		// Loopback allowed, so the first request is served; the redirect is not.
		_, err := reachClient(Loopback[0], netip.MustParsePrefix("fc00::/7")).Fetch(context.Background(), o.file(), 100)
		if err == nil || !strings.Contains(err.Error(), "which a depositor's URL may never reach") || !Permanent(err) {
			t.Fatalf("Fetch of a redirect to %s = %v; want a permanent refusal", to, err)
		}
		if n := len(o.requests()); n != 1 {
			t.Fatalf("the server got %d requests; want one, not retried", n)
		}
	}
}

// The operator's own services (storage, inventory, callbacks) are reached
// wherever they are.
func TestReachAnyAddress(t *testing.T) {
	o := newOrigin(t, []byte("inventory"), nil)
	if got, err := New(Config{AnyAddress: true}).Fetch(context.Background(), o.file(), 100); err != nil || string(got) != "inventory" {
		t.Fatalf("Fetch with AnyAddress = %q, %v; want the file", got, err)
	}
}

// guardedDial connects to address as the depositors' client does, with
// allow's reach: a real connect within ctx, unless the check refuses it first.
func guardedDial(ctx context.Context, address string, allow ...netip.Prefix) error {
	var d net.Dialer
	guardDialer(&d, allow)
	c, err := d.DialContext(ctx, "tcp", address)
	if err == nil {
		c.Close()
	}
	return err
}

// One address of each range the IANA registries mark not globally
// reachable, besides loopback and the private ranges, is refused both as a
// URL naming it and at the dial, with a message naming its range.
func TestReachRefusesTheSpecialRanges(t *testing.T) {
	for addr, what := range map[string]string{
		"198.18.0.1":   "a benchmarking",
		"2001:2::1":    "a benchmarking",
		"240.0.0.1":    "a reserved",
		"192.0.0.1":    "an IETF protocol assignment",
		"2001:20::1":   "an IETF protocol assignment",
		"192.0.2.1":    "a documentation",
		"198.51.100.1": "a documentation",
		"203.0.113.1":  "a documentation",
		"2001:db8::1":  "a documentation",
		"3fff::1":      "a documentation",
		"192.88.99.1":  "a 6to4 relay",
		"100::1":       "a discard-only",
		"100:0:0:1::1": "a dummy",
		"5f00::1":      "a segment routing (SRv6)",
	} {
		address := net.JoinHostPort(addr, "80")
		want := fmt.Sprintf("refused: it reaches %s, %s address, which a depositor's URL may reach only if the daemon's %s includes it",
			addr, what, AllowSetting)
		u := "http://" + address + "/file.bin"
		if _, err := reachClient().Fetch(context.Background(), u, 100); err == nil || err.Error() != "fetch "+u+": "+want || !Permanent(err) {
			t.Errorf("Fetch(%s) = %v;\nwant the permanent error %q", u, err, want)
		}
		if err := guardedDial(context.Background(), address); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("dial %s: %v; want it refused: %q", address, err, want)
		}
	}
}

// An IPv6 address that carries an IPv4 address (6to4, Teredo, IPv4-compatible,
// NAT64) is checked as that address: here the test server's, 127.0.0.1.
func TestReachRefusesAnEmbeddedLoopbackAddress(t *testing.T) {
	o := newOrigin(t, []byte("secret"), nil)
	port := o.Listener.Addr().(*net.TCPAddr).Port
	for _, carrier := range []string{
		"6to4 2002:7f00:1::1",
		"Teredo 2001:0:4136:e378:8000:63bf:80ff:fffe", // the client's address, inverted
		"IPv4-compatible ::7f00:1",
		"local-use NAT64 64:ff9b:1::7f00:1",
	} {
		addr := carrier[strings.LastIndexByte(carrier, ' ')+1:]
		u := fmt.Sprintf("http://[%s]:%d/file.bin", addr, port)
		want := "fetch " + u + ": refused: it reaches 127.0.0.1 (as " + carrier + "), a loopback address, which a depositor's URL may reach only if the daemon's " +
			AllowSetting + " includes it"
		if _, err := reachClient().Fetch(context.Background(), u, 100); err == nil || err.Error() != want || !Permanent(err) {
			t.Errorf("Fetch = %v;\nwant the permanent error %q", err, want)
		}
		if err := guardedDial(context.Background(), fmt.Sprintf("[%s]:%d", addr, port)); err == nil || !strings.Contains(err.Error(), "it reaches 127.0.0.1 (as "+carrier+"), a loopback address") {
			t.Errorf("dial %s: %v; want it refused as 127.0.0.1", addr, err)
		}
	}
	if n := len(o.requests()); n != 0 {
		t.Fatalf("the server got %d requests; want none", n)
	}
	// A private address in 6to4 and in Teredo, at the dial.
	for _, addr := range []string{"[2002:a01:203::1]:80", "[2001:0:4136:e378:8000:63bf:f5ff:fffe]:80"} {
		if err := guardedDial(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "a private address") {
			t.Errorf("dial %s: %v; want it refused as a private address", addr, err)
		}
	}
}

// An allowed special range passes the check: the dial to a benchmarking
// address is refused without the allowance, and with it goes out to the
// network (whatever answers there, or nothing: that is the network's, not
// the check's; no test may put an address on this host's interfaces).
func TestReachAllowsAnAllowedSpecialRange(t *testing.T) {
	addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(rand.IntN(256)), byte(1 + rand.IntN(254))}), 9)
	var refused *reachError
	if err := guardedDial(context.Background(), addr.String()); !errors.As(err, &refused) || !strings.Contains(err.Error(), "a benchmarking address") {
		t.Fatalf("dial %s without an allowance: %v; want it refused as a benchmarking address", addr, err)
	}
	allow := netip.MustParsePrefix("198.18.0.0/15")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := guardedDial(ctx, addr.String(), allow); errors.As(err, &refused) {
		t.Fatalf("dial %s with %s allowed: %v; want it let through", addr, allow, err)
	}
}
