package events

import (
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ingestq/ingestq/internal/redact"
)

// routeUser is the user a cluster member presents, with the cluster
// secret as its password, on its routes: nats-server's route
// authorization takes a user and a password.
const routeUser = "ingestq-route"

// withSecret sets a cluster member's route authorization: every incoming
// route must present the secret (routeAuth checks it), and the routes it
// dials to the members announced in ZooKeeper present it, as the route
// URL's password (the URLs announced there have none). Cluster.Password
// stays empty: nats-server presents it to every server a peer tells it
// of, and a member without the secret (a rolling restart under way) tells
// of any server that routed to it, a rogue too. The user alone makes the
// server's INFO say that routes need credentials.
func withSecret(opts *server.Options, cfg Config) {
	if cfg.ClusterSecret == "" {
		return
	}
	opts.Cluster.Username = routeUser
	for _, u := range opts.Routes {
		u.User = url.UserPassword(routeUser, cfg.ClusterSecret)
	}
	opts.CustomRouterAuthentication = &routeAuth{secret: cfg.ClusterSecret, setting: cfg.SecretSetting, log: cfg.Logger}
}

// routeAuth admits a route that presents the cluster secret, and says
// once per host and reason that it refused one that did not, naming the
// setting: nats-server dials a refused route again every second, and its
// own line ("authentication error") says neither whose route nor why.
type routeAuth struct {
	secret, setting string
	log             *slog.Logger
	said            onceEach
}

// Check admits c if it presents the secret.
func (a *routeAuth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o.Username == routeUser && same(o.Password, a.secret) {
		return true
	}
	from := remoteHost(c, "?")
	why := "it presented another cluster secret"
	switch {
	case o.Username == routeUser && o.Password == "":
		// A member dialing a server it learnt of from a peer (withSecret):
		// the route it dialed from ZooKeeper is the one that counts.
		a.log.Debug("events: refused a NATS route a member dialed to a server a peer told it of", "from", from)
		return false
	case o.Password == "":
		why = "it presented no cluster secret"
	}
	if a.said.first(from + why) {
		a.log.Warn("events: refused a NATS route from another server: "+why+
			"; every host of the cluster needs the same secret (said once per host)", "from", from, "setting", a.setting)
	}
	return false
}

// remoteHost is the host c connects from, without its port (which
// changes with every try), for the lines said once per host; none when it
// has no address.
func remoteHost(c server.ClientAuthentication, none string) string {
	addr := c.RemoteAddress()
	if addr == nil {
		return none
	}
	return hostOnly(addr.String())
}

// hostOnly is addr without its port; addr itself when it has none.
func hostOnly(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// routeRefused is how nats-server logs a route the other server refused.
const routeRefused = "Route Error 'Authorization Violation'"

// refusedLine says, once per server refusing, that a server refused this
// one's route, naming the setting; "" when line is none of those, or was
// said already. A route this server dials from ZooKeeper is dialed again
// a second after each refusal, each logged by nats-server as an error: it
// is said at a refusal a second or more after the one before. A route to
// a server a peer told of, which a member with the secret refuses
// (withSecret), is dialed again at once (within 0.1 s), until the route
// from ZooKeeper is up.
func (l serverLogger) refusedLine(line string) (string, []any) {
	if !strings.HasSuffix(line, routeRefused) {
		return "", nil
	}
	by, _, _ := strings.Cut(line, " - ") // the refusing server's address
	if !l.said.firstAfter(by, server.DEFAULT_ROUTE_RECONNECT) {
		return "", nil
	}
	msg := "events: a NATS server refused this server's route: it asks for a cluster secret, and this host has none " +
		"(said once per server)"
	if l.secret != "" {
		msg = "events: a NATS server refused this server's route: its cluster secret differs from this host's, or it has none " +
			"(said once per server)"
	}
	return msg, []any{"by", by, "setting", l.setting}
}

// routeAuthLine tells whether nats-server's error line is about a route
// refused for its credentials, either side, or a client refused:
// refusedLine, routeAuth and clientAuth say it once, in words of ingestq's.
func routeAuthLine(line string) bool {
	return strings.HasSuffix(line, routeRefused) ||
		(strings.Contains(line, " - rid:") || strings.Contains(line, " - cid:")) && strings.Contains(line, server.ErrAuthentication.Error())
}

// maskSecret returns line with the cluster secret masked: nats-server
// logs a route it drops with its URL, password and all.
func maskSecret(line, secret string) string {
	if secret == "" {
		return line
	}
	escaped := url.UserPassword(routeUser, secret).String()
	line = strings.ReplaceAll(line, escaped, routeUser+":"+redact.Mask)
	return strings.ReplaceAll(line, secret, redact.Mask)
}

// onceEach tells whether a key is to be said: once, at its first sighting
// (first) or at the first a while after the one before (firstAfter). It
// keeps at most onceEachMax keys; past that, every new key counts as
// said: a flood of refused hosts is not a line each.
type onceEach struct {
	mu   sync.Mutex
	seen map[string]seenKey
}

// seenKey is when a key was last seen, and whether it was said.
type seenKey struct {
	at   time.Time
	said bool
}

const onceEachMax = 1000

func (o *onceEach) first(key string) bool { return o.firstAfter(key, 0) }

// firstAfter tells whether key is to be said now: the first time it is
// seen at least wait after it was last seen (wait 0: the first time it is
// seen); never again after.
func (o *onceEach) firstAfter(key string, wait time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.seen[key]
	if !ok {
		if len(o.seen) >= onceEachMax {
			return false
		}
		if o.seen == nil {
			o.seen = map[string]seenKey{}
		}
	}
	now := time.Now()
	say := !k.said && (wait == 0 || ok && now.Sub(k.at) >= wait)
	o.seen[key] = seenKey{at: now, said: k.said || say}
	return say
}
