package dashboard_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// EnvArtifacts names the folder the screenshots go to (default
// artifacts/dashboard at the repository's root).
const EnvArtifacts = "INGESTQ_ARTIFACTS"

// installHint is how to get the browser the tests drive.
const installHint = "scripts/install-chromium.sh (or apt-get install -y chromium)"

// browser is the package's one headless Chromium, started by the first
// test that needs it.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	tmp    string // its TMPDIR: Chromium leaves a folder there when it is stopped
	err    error
}

// withBrowser stops the browser after the tests.
type withBrowser struct{ m interface{ Run() int } }

func (w withBrowser) Run() int {
	code := w.m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	if browser.tmp != "" {
		_ = os.RemoveAll(browser.tmp)
	}
	return code
}

// startBrowser starts Chromium headless (as root it needs --no-sandbox).
func startBrowser() {
	path, err := exec.LookPath("chromium")
	if err != nil {
		browser.err = fmt.Errorf("chromium is not installed: run %s: %w", installHint, err)
		return
	}
	if browser.tmp, err = os.MkdirTemp("", "ingestq-chromium-"); err != nil {
		browser.err = err
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900), chromedp.Env("TMPDIR="+browser.tmp))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	browser.ctx, browser.cancel = bctx, func() { bcancel(); acancel() }
	if err := chromedp.Do(bctx); err != nil {
		browser.err = fmt.Errorf("chromium %s did not start (%s): %w", path, installHint, err)
	}
}

// page is a tab of the browser, with what its console said.
type page struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newTab opens a tab; it closes when the test ends. A missing Chromium
// fails the test, with how to install it.
func newTab(t *testing.T) *page {
	t.Helper()
	browser.once.Do(startBrowser)
	if browser.err != nil {
		t.Fatal(browser.err)
	}
	ctx, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	ctx, stop := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(stop)
	p := &page{t: t, ctx: ctx}
	must(t, chromedp.Listen(ctx, p.listen))
	return p
}

// listen keeps the console's errors: console.error calls, exceptions no
// code caught, and the browser's own error entries (a resource that did
// not load, a refusal by the page's security policy).
func (p *page) listen(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, cmp.Or(string(a.Value), a.Description))
			}
			msg = "console." + string(ev.Type) + ": " + strings.Join(args, " ")
		}
	case *runtime.EventExceptionThrown:
		msg = "exception: " + ev.ExceptionDetails.Text
		if ex := ev.ExceptionDetails.Exception; ex != nil {
			msg += " " + ex.Description
		}
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError {
			msg = "browser log (" + string(ev.Entry.Source) + "): " + ev.Entry.Text + " " + ev.Entry.URL
		}
	}
	if msg != "" {
		p.mu.Lock()
		p.errors = append(p.errors, msg)
		p.mu.Unlock()
	}
}

// noConsoleErrors fails the test if the console said anything wrong.
func (p *page) noConsoleErrors(what string) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errors {
		p.t.Errorf("%s: %s", what, e)
	}
	p.errors = nil
}

// do runs browser actions.
func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatal(err)
	}
}

// open loads a page and waits until its live stream is connected.
func (p *page) open(url string) {
	p.t.Helper()
	p.do(chromedp.Navigate(url), chromedp.WaitVisible(".live-status.up"))
}

// text is the text of the first element sel finds.
func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(sel))
	must(p.t, err)
	return s
}

// signIn signs in through the form with token.
func (p *page) signIn(base, token string) {
	p.t.Helper()
	p.do(chromedp.Navigate(base+"/ui/login"), chromedp.SendKeys("#token", token), chromedp.Click("#sign-in"),
		chromedp.WaitVisible(".live-status.up"))
}

// screenshot keeps the whole page as a PNG in the artifacts folder and
// logs its path.
func (p *page) screenshot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	must(p.t, err)
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = filepath.Join("..", "artifacts", "dashboard")
	}
	must(p.t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, p.t.Name()+"-"+name+".png")
	must(p.t, os.WriteFile(file, png, 0o644))
	abs, _ := filepath.Abs(file)
	p.t.Logf("screenshot: %s", abs)
}

// seenWhen arms a watch of the page's DOM for the JavaScript condition
// cond; the promise it keeps resolves with the browser's clock (ms since
// the epoch) when cond first holds, checked at each change of the DOM.
func (p *page) seenWhen(cond string) {
	p.t.Helper()
	js := `window.__seen = new Promise(resolve => {
	  const ok = () => { try { return (` + cond + `); } catch (e) { return false; } };
	  if (ok()) { resolve(Date.now()); return; }
	  const obs = new MutationObserver(() => { if (ok()) { obs.disconnect(); resolve(Date.now()); } });
	  obs.observe(document.documentElement, { subtree: true, childList: true, attributes: true, characterData: true });
	}); true`
	_, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js))
	must(p.t, err)
}

// seen waits for the condition armed by seenWhen and says when it held.
func (p *page) seen() time.Time {
	p.t.Helper()
	ms, err := chromedp.Run(p.ctx, chromedp.Evaluate[int64](`window.__seen`, chromedp.EvalAwaitPromise))
	must(p.t, err)
	return time.UnixMilli(ms)
}
