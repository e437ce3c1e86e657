package cli

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/tlsfiles"
	"github.com/ingestq/ingestq/internal/tlstest"
)

// The expiry warning says what to do with what it names: a served
// certificate is renewed, a cross-signed certificate of its chain (taken
// even expired) removed; a CA of a CA file is re-issued, or removed from
// the file when no peer's certificate is signed by it any more (a
// rotation's old CA, a system bundle's): its renewal is not the remedy of
// a CA nobody uses, and the warning would come daily until it is removed.
func TestExpiryWarningSaysWhatToDoWithACertificateOrACA(t *testing.T) {
	t.Parallel()
	hour := tlstest.ValidFor(time.Hour)
	authority := tlstest.NewAuthorityWith(t, "short", hour)
	ca, err := tlsfiles.LoadCA(authority.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := authority.PeerWith(t, "leaf", hour, "127.0.0.1")
	pair, err := tlsfiles.Load(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e             expiring
		want, notWant string
	}{
		{servedCA{"--nats-tls-", ca, nil}.expiring(),
			"re-issue it with the same key and name, or remove it from the file if no peer's certificate is signed by it any more", "renew it"},
		{servedCert{"--tls-", pair}.expiring(), "renew it, or remove from the file a cross-signed certificate of its chain no client needs any more", "re-issue it"},
	} {
		var logs bytes.Buffer
		a := &app{log: slog.New(slog.NewTextHandler(&logs, nil))}
		a.warnExpiring(c.e)
		if line := logs.String(); !strings.Contains(line, "TLS certificate expires within 14 days: "+c.want) || strings.Contains(line, c.notWant) {
			t.Errorf("%s: %s; want it to say %q, not %q", c.e.flag, line, c.want, c.notWant)
		}
	}
}
