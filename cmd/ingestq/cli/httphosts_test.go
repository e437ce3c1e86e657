package cli

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/logtest"
)

// --http-hosts takes names, wildcards and *; anything else is a usage error
// naming it, as is the setting without a server; * is warned of as unsafe.
func TestHTTPHostsSetting(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	a := &app{log: slog.New(slog.NewTextHandler(logs, nil))}
	for _, c := range []struct {
		f    serveFlags
		want string
	}{
		{serveFlags{http: "127.0.0.1:0", httpHosts: "proxy.example.org,https://proxy.example.org"}, `--http-hosts "https://proxy.example.org": want a host name`},
		{serveFlags{http: "127.0.0.1:0", httpHosts: "proxy.example.org:443"}, `--http-hosts "proxy.example.org:443": want a host name`},
		{serveFlags{http: "off", httpHosts: "proxy.example.org"}, "--http-hosts proxy.example.org: the HTTP server is off (--http off)"},
	} {
		web, _, err := a.startHTTP(c.f, nil)
		if web != nil {
			web.Close()
		}
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--http %s --http-hosts %s: %v, want a usage error saying %s", c.f.http, c.f.httpHosts, err, c.want)
		}
	}
	web, _, err := a.startHTTP(serveFlags{http: "127.0.0.1:0", httpHosts: "*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	web.Close()
	if lines := logs.Lines("level=WARN", "--http-hosts *", "DNS rebinding"); len(lines) != 1 {
		t.Errorf("--http-hosts * warned of %d times, want once:\n%s", len(lines), logs)
	}
}
