package fetch

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
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
	}
	for _, tc := range cases {
		err := checkAddr(netip.MustParseAddr(tc.addr), tc.allow)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s (allow %v): %v; want it reached", tc.addr, tc.allow, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "a "+tc.want+" address") || !Permanent(err)):
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
