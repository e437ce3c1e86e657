package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// A certificate's error, wrapped as the HTTP client wraps it (url.Error,
// tls.CertificateVerificationError), is told by its reason: each says
// what is wrong, and none says "not one for a server" but a certificate
// whose usage is not a server's.
func TestUntrustedTellsEachReason(t *testing.T) {
	wrapped := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://127.0.0.1:8080/api/v1/audit",
			Err: fmt.Errorf("dial: %w", &tls.CertificateVerificationError{Err: err})}
	}
	for err, want := range map[error]string{
		wrapped(x509.UnknownAuthorityError{}):                                          "signed by an authority this machine does not trust",
		wrapped(x509.HostnameError{Host: "localhost"}):                                 "not for the host --api names",
		wrapped(x509.CertificateInvalidError{Reason: x509.Expired}):                    "has expired",
		wrapped(x509.CertificateInvalidError{Reason: x509.IncompatibleUsage}):          "not one for a server",
		wrapped(x509.CertificateInvalidError{Reason: x509.NotAuthorizedToSign}):        "not valid here",
		wrapped(x509.CertificateInvalidError{Reason: x509.CANotAuthorizedForThisName}): "not valid here",
		wrapped(errors.New("connection refused")):                                      "",
		nil: "",
	} {
		got := untrusted(err)
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("untrusted(%v) = %q, want %q", err, got, want)
		}
	}
}
