package dashboard_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ingestq/ingestq/reactor"
)

// The overview's hosts say where each daemon is reached: its HTTP address,
// a link to its own dashboard, and its NATS route, shown the moment the
// daemon announces it; a daemon without either says why not.
func TestHostsShowTheirAddresses(t *testing.T) {
	b := setup(t)
	register := func(h reactor.HostInfo) {
		data, err := json.Marshal(h)
		must(t, err)
		must(t, b.q.RegisterHost(t.Context(), h.Name, data))
	}
	register(reactor.HostInfo{Name: "web1", Version: "test", Since: time.Now(), HTTP: b.base})
	register(reactor.HostInfo{Name: "quiet", Version: "test", Since: time.Now()})

	p := newTab(t)
	p.signIn(b.base, readToken)
	p.open(b.base + "/ui/")
	if got := p.text(`tr[data-host="quiet"]`); !strings.Contains(got, "no HTTP server") || !strings.Contains(got, "not clustered") {
		t.Errorf("a host without addresses: %q, want it to say it has no HTTP server and is not clustered", got)
	}
	// When it last wrote its node: a time, which an idle page does not make stale.
	if seen, err := time.Parse("2006-01-02 15:04:05Z", p.text(`tr[data-host="quiet"] td.seen`)); err != nil || time.Since(seen) > time.Minute {
		t.Errorf("the host's last write: %v, %v; want a time within the minute", seen, err)
	}
	href, err := chromedp.Run(p.ctx, chromedp.AttributeValue(`tr[data-host="web1"] td.http a`, "href"))
	must(t, err)
	if href.Value != b.base+"/ui/" {
		t.Errorf("web1's link: %q, want its dashboard %s/ui/", href.Value, b.base)
	}
	p.seenWhen(`document.querySelector('tr[data-host="web1"] td.nats-route').textContent === "nats://10.0.0.1:6222"`)
	must(t, b.q.AnnounceRoute(t.Context(), "web1", "nats://10.0.0.1:6222"))
	p.seen()
	p.screenshot("hosts")
	p.do(chromedp.Click(`tr[data-host="web1"] td.http a`), chromedp.WaitVisible(`tr[data-host="web1"]`))
	p.noConsoleErrors("hosts")
}

// A job's page and the job tables name the host whose daemon holds the
// job, or say that its lock's session is no live host's: a lock left
// behind.
func TestJobPageNamesTheHostInHand(t *testing.T) {
	b := setup(t, noTokens)
	bt := b.batch("uuid-in-hand")
	mine, other := b.job(bt), b.job(bt)
	data, err := json.Marshal(reactor.HostInfo{Name: "worker1", Version: "test"})
	must(t, err)
	must(t, b.q.RegisterHost(t.Context(), "worker1", data))
	_, err = b.q.LockJob(t.Context(), mine) // on the session of worker1's node
	must(t, err)
	_, err = b.svc.Q.LockJob(t.Context(), other) // on a session with no host node
	must(t, err)
	b.get("", "/ui/jobs/"+mine).is(t, http.StatusOK, `<dd id="in-hand">yes: host worker1 works on it</dd>`)
	b.get("", "/ui/jobs/"+other).is(t, http.StatusOK, `<dd id="in-hand">yes: session 0x`, "(no live ingestq host: another program, or a daemon that died) works on it")
	// The job tables name the host too.
	for _, path := range []string{"/ui/batches/" + bt.ID, "/ui/jobs?state=pending"} {
		b.get("", path).is(t, http.StatusOK, "(in hand: host worker1)", "(in hand: session 0x")
	}
	b.get("", "/ui/search?q=loc-1").is(t, http.StatusOK, "(in hand: host worker1)")
}
