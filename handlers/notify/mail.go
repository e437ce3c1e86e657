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
	cv := &conversation{ctx: ctx, addr: m.Addr}
	from, rcpts, err := cv.addresses(m.From, to)
	if err != nil {
		return err
	}
	msg := compose(from, rcpts, subject, body, time.Now())

	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	cv.ctx = ctx
	if err := cv.connect(); err != nil {
		return err
	}
	defer cv.close()
	if err := cv.hello(m.Username, m.Password); err != nil {
		return err
	}
	if err := cv.transfer(from, rcpts, msg); err != nil {
		return err
	}
	// The message is accepted: a failed goodbye must not make the caller
	// send it again.
	_ = cv.c.Quit()
	return nil
}

func (m Mailer) timeout() time.Duration {
	if m.Timeout <= 0 {
		return DefaultMailTimeout
	}
	return m.Timeout
}

// conversation is one Send's exchange with the server.
type conversation struct {
	ctx  context.Context // the caller's, then bounded by the Mailer's timeout
	addr string          // host:port of the server
	host string          // its host, for TLS and AUTH
	c    *smtp.Client
	stop func() bool // ends the hook that unblocks the connection when ctx ends
}

// fail names the server and the step that failed, and says when the
// context ended it.
func (cv *conversation) fail(step string, err error) error {
	if cerr := cv.ctx.Err(); cerr != nil {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	return fmt.Errorf("smtp %s: %s: %w", cv.addr, step, err)
}

// addresses checks the server's address (and keeps its host), the sender
// and the recipients, before anything is sent.
func (cv *conversation) addresses(sender string, to []string) (from *mail.Address, rcpts []*mail.Address, err error) {
	if cv.host, _, err = net.SplitHostPort(cv.addr); err != nil {
		return nil, nil, cv.fail("server address", err)
	}
	if from, err = mail.ParseAddress(sender); err != nil {
		return nil, nil, cv.fail("sender", fmt.Errorf("From %q: %w", sender, err))
	}
	if len(to) == 0 {
		return nil, nil, cv.fail("recipients", errors.New("no recipients"))
	}
	rcpts = make([]*mail.Address, len(to))
	for i, a := range to {
		if rcpts[i], err = mail.ParseAddress(a); err != nil {
			return nil, nil, cv.fail("recipients", fmt.Errorf("%q: %w", a, err))
		}
	}
	return from, rcpts, nil
}

// connect dials the server and reads its greeting.
func (cv *conversation) connect() error {
	var d net.Dialer
	conn, err := d.DialContext(cv.ctx, "tcp", cv.addr)
	if err != nil {
		return cv.fail("connect", err)
	}
	// net/smtp has no context: when ctx ends (timeout or cancel) a deadline
	// in the past unblocks any read or write. Set only then, so that the
	// failure it causes always finds ctx.Err() set.
	cv.stop = context.AfterFunc(cv.ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	if cv.c, err = smtp.NewClient(conn, cv.host); err != nil {
		conn.Close()
		cv.stop()
		return cv.fail("greeting", err)
	}
	return nil
}

// close ends a connected conversation.
func (cv *conversation) close() {
	cv.c.Close()
	cv.stop()
}

// hello sends EHLO, upgrades to TLS when the server offers STARTTLS, and
// authenticates when a user is set.
func (cv *conversation) hello(user, password string) error {
	if err := cv.c.Hello(helloName()); err != nil {
		return cv.fail("EHLO", err)
	}
	if ok, _ := cv.c.Extension("STARTTLS"); ok {
		if err := cv.c.StartTLS(&tls.Config{ServerName: cv.host, MinVersion: tls.VersionTLS12}); err != nil {
			return cv.fail("STARTTLS", err)
		}
	}
	if user == "" {
		return nil
	}
	if ok, _ := cv.c.Extension("AUTH"); !ok {
		return cv.fail("AUTH", errors.New("server does not offer authentication"))
	}
	if err := cv.c.Auth(smtp.PlainAuth("", user, password, cv.host)); err != nil {
		return cv.fail("AUTH", err)
	}
	return nil
}

// transfer sends the envelope and the message; it is accepted once the
// server answers the end of DATA.
func (cv *conversation) transfer(from *mail.Address, rcpts []*mail.Address, msg []byte) error {
	if err := cv.c.Mail(from.Address); err != nil {
		return cv.fail("MAIL FROM", err)
	}
	for _, r := range rcpts {
		if err := cv.c.Rcpt(r.Address); err != nil {
			return cv.fail(fmt.Sprintf("RCPT TO <%s>", r.Address), err)
		}
	}
	w, err := cv.c.Data()
	if err != nil {
		return cv.fail("DATA", err)
	}
	// The writer dot-stuffs lines that start with "." and ends lines with CRLF.
	if _, err := w.Write(msg); err != nil {
		return cv.fail("DATA", err)
	}
	if err := w.Close(); err != nil {
		return cv.fail("end of DATA", err) // the server refused the message
	}
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
