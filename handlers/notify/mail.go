package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"os"
	"regexp"
	"time"
)

// DefaultMailTimeout bounds a whole SMTP conversation when Mailer.Timeout
// is zero, so a stuck server cannot hold a job forever.
const DefaultMailTimeout = 30 * time.Second

// Mailer sends plain-text mail through one SMTP server.
type Mailer struct {
	Addr               string        // host:port of the SMTP server
	From               string        // sender address, e.g. "Ingest <ingest@example.org>"
	Username, Password string        // optional PLAIN auth (only over TLS or to localhost, as net/smtp requires)
	Timeout            time.Duration // the whole conversation; 0 means DefaultMailTimeout
}

// Send delivers one UTF-8 plain-text message to every address in to. It
// upgrades to TLS when the server offers STARTTLS. Errors name the server
// and the step of the conversation that failed.
func (m Mailer) Send(ctx context.Context, to []string, subject, body string) error {
	fail := func(step string, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fmt.Errorf("smtp %s: %s: %w", m.Addr, step, err)
	}
	host, _, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return fail("server address", err)
	}
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fail("sender", fmt.Errorf("From %q: %w", m.From, err))
	}
	if len(to) == 0 {
		return fail("recipients", errors.New("no recipients"))
	}
	rcpts := make([]*mail.Address, len(to))
	for i, a := range to {
		if rcpts[i], err = mail.ParseAddress(a); err != nil {
			return fail("recipients", fmt.Errorf("%q: %w", a, err))
		}
	}
	msg := compose(from, rcpts, subject, body, time.Now())

	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultMailTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fail("connect", err)
	}
	// net/smtp has no context: when ctx ends (timeout or cancel) a deadline
	// in the past unblocks any read or write. Set only then, so that the
	// failure it causes always finds ctx.Err() set.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fail("greeting", err)
	}
	defer c.Close()
	if err := c.Hello(helloName()); err != nil {
		return fail("EHLO", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return fail("STARTTLS", err)
		}
	}
	if m.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return fail("AUTH", errors.New("server does not offer authentication"))
		}
		if err := c.Auth(smtp.PlainAuth("", m.Username, m.Password, host)); err != nil {
			return fail("AUTH", err)
		}
	}
	if err := c.Mail(from.Address); err != nil {
		return fail("MAIL FROM", err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r.Address); err != nil {
			return fail(fmt.Sprintf("RCPT TO <%s>", r.Address), err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fail("DATA", err)
	}
	// The writer dot-stuffs lines that start with "." and ends lines with CRLF.
	if _, err := w.Write(msg); err != nil {
		return fail("DATA", err)
	}
	if err := w.Close(); err != nil {
		return fail("end of DATA", err) // the server refused the message
	}
	// The message is accepted: a failed goodbye must not make the caller
	// send it again.
	_ = c.Quit()
	return nil
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// helloName is this host's name for EHLO, or "localhost" when the name
// would not be a valid EHLO argument.
func helloName() string {
	if h, err := os.Hostname(); err == nil && len(h) <= 253 && hostnameRE.MatchString(h) {
		return h
	}
	return "localhost"
}
