package cli

import (
	"net/http"
	"sync/atomic"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/dashboard"
	"github.com/ingestq/ingestq/internal/httpd"
)

// startingDetail is what the API and the dashboard answer, 503, before
// the daemon has started them.
const startingDetail = "the daemon is starting: it serves the API and the dashboard once it holds its host name in ZooKeeper " +
	"and its event stream runs (up to twice --zk-session-timeout after a restart); its log says what it waits for"

// lateRoute serves a route whose handler is made once the daemon has
// started, and answers 503 (api.Starting) until then.
type lateRoute struct{ h atomic.Pointer[http.Handler] }

func (l *lateRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	api.Starting(startingDetail).ServeHTTP(w, r)
}

// set has l serve h from now on.
func (l *lateRoute) set(h http.Handler) { l.h.Store(&h) }

// lateRoutes registers the API's and the dashboard's prefixes on web at
// once, answering 503 until set, and / as the way to the dashboard (a
// browser opened at the daemon's address was answered 404 meanwhile); nil
// without a server.
func lateRoutes(web *httpd.Server) (apiRoute, dashRoute *lateRoute) {
	if web == nil {
		return nil, nil
	}
	apiRoute, dashRoute = &lateRoute{}, &lateRoute{}
	web.Handle(api.Prefix, apiRoute)
	web.Handle(dashboard.Prefix, dashRoute)
	web.Handle("GET /{$}", dashboard.Redirect())
	return apiRoute, dashRoute
}
