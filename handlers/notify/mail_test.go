package notify

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"
)

func parseMessage(t *testing.T, raw string) (*mail.Message, string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("message does not parse: %v\n%s", err, raw)
	}
	body, err := io.ReadAll(msg.Body)
	if err != nil {
		t.Fatal(err)
	}
	return msg, string(body)
}

func TestSendDelivers(t *testing.T) {
	srv := startSMTPD(t, nil)
	m := Mailer{Addr: srv.addr(), From: "Ingest <ingest@example.org>"}
	subject := "Job jid-1 completé ✓"
	body := "Your deposit is stored.\n.hidden line starts with a dot\n..two dots\nEnd."
	if err := m.Send(context.Background(), []string{"curator@example.org", "Ops <ops@example.org>"}, subject, body); err != nil {
		t.Fatal(err)
	}
	s := <-srv.sessions
	if want := []string{"EHLO", "MAIL", "RCPT", "RCPT", "DATA", "QUIT"}; !slices.Equal(s.commands, want) {
		t.Errorf("commands %v, want %v", s.commands, want)
	}
	if s.from != "ingest@example.org" || !slices.Equal(s.rcpts, []string{"curator@example.org", "ops@example.org"}) {
		t.Errorf("envelope from %q to %v", s.from, s.rcpts)
	}
	// On the wire a line starting with "." gets another one.
	if !slices.Contains(s.wire, "..hidden line starts with a dot") || !slices.Contains(s.wire, "...two dots") {
		t.Errorf("lines starting with a dot were not stuffed: %q", s.wire)
	}

	msg, got := parseMessage(t, s.message)
	h := msg.Header
	if got != strings.ReplaceAll(body, "\n", "\r\n")+"\r\n" {
		t.Errorf("body %q", got)
	}
	if dec, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject")); err != nil || dec != subject {
		t.Errorf("Subject %q decodes to %q, %v", h.Get("Subject"), dec, err)
	}
	if !strings.HasPrefix(h.Get("Subject"), "=?utf-8?") {
		t.Errorf("non-ASCII Subject %q is not RFC 2047-encoded", h.Get("Subject"))
	}
	if from, err := h.AddressList("From"); err != nil || len(from) != 1 || from[0].Address != "ingest@example.org" || from[0].Name != "Ingest" {
		t.Errorf("From %q: %v", h.Get("From"), err)
	}
	if to, err := h.AddressList("To"); err != nil || len(to) != 2 || to[1].Address != "ops@example.org" {
		t.Errorf("To %q: %v", h.Get("To"), err)
	}
	if _, err := h.Date(); err != nil {
		t.Errorf("Date %q: %v", h.Get("Date"), err)
	}
	if id := h.Get("Message-ID"); !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@example.org>") {
		t.Errorf("Message-ID %q", id)
	}
	if h.Get("MIME-Version") != "1.0" || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Content-Transfer-Encoding") != "7bit" {
		t.Errorf("MIME headers %q %q %q", h.Get("MIME-Version"), h.Get("Content-Type"), h.Get("Content-Transfer-Encoding"))
	}
}

func TestSendNonASCIIBody(t *testing.T) {
	srv := startSMTPD(t, nil)
	body := "Dépôt terminé.\n.point\n" + strings.Repeat("x", 1200)
	if err := (Mailer{Addr: srv.addr(), From: "ingest@example.org"}).Send(context.Background(), []string{"a@example.org"}, "done", body); err != nil {
		t.Fatal(err)
	}
	s := <-srv.sessions
	msg, raw := parseMessage(t, s.message)
	if cte := msg.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
		t.Fatalf("Content-Transfer-Encoding %q", cte)
	}
	for _, l := range s.wire {
		if len(l) > maxLine {
			t.Errorf("a line of %d bytes went on the wire", len(l))
		}
	}
	dec, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(body, "\n", "\r\n") + "\r\n"; string(dec) != want {
		t.Errorf("decoded body %q, want %q", dec, want)
	}
}

func TestSendSubjectCannotInjectHeaders(t *testing.T) {
	srv := startSMTPD(t, nil)
	subject := "Hi\r\nBcc: evil@example.org"
	if err := (Mailer{Addr: srv.addr(), From: "ingest@example.org"}).Send(context.Background(), []string{"a@example.org"}, subject, "x"); err != nil {
		t.Fatal(err)
	}
	msg, _ := parseMessage(t, (<-srv.sessions).message)
	if bcc := msg.Header.Get("Bcc"); bcc != "" {
		t.Errorf("subject injected Bcc: %q", bcc)
	}
	if dec, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); dec != subject {
		t.Errorf("Subject decodes to %q", dec)
	}
}

func TestSendAuth(t *testing.T) {
	srv := startSMTPD(t, func(s *smtpd) { s.auth = true })
	m := Mailer{Addr: srv.addr(), From: "ingest@example.org", Username: "ingest", Password: "s3cret"}
	if err := m.Send(context.Background(), []string{"a@example.org"}, "s", "b"); err != nil {
		t.Fatal(err)
	}
	if s := <-srv.sessions; s.auth != "\x00ingest\x00s3cret" {
		t.Errorf("server got PLAIN %q", s.auth)
	}
	// A server that offers no AUTH must not get the message unauthenticated.
	plain := startSMTPD(t, nil)
	m.Addr = plain.addr()
	err := m.Send(context.Background(), []string{"a@example.org"}, "s", "b")
	if err == nil || !strings.Contains(err.Error(), "AUTH") {
		t.Errorf("error = %v", err)
	}
	if s := <-plain.sessions; slices.Contains(s.commands, "MAIL") {
		t.Errorf("mail sent without authentication: %v", s.commands)
	}
}

func TestSendRejectedRecipient(t *testing.T) {
	srv := startSMTPD(t, func(s *smtpd) { s.rejectRcpt = "gone@example.org" })
	err := (Mailer{Addr: srv.addr(), From: "ingest@example.org"}).Send(context.Background(),
		[]string{"a@example.org", "gone@example.org"}, "s", "b")
	for _, w := range []string{srv.addr(), "RCPT TO <gone@example.org>", "550", "no such user"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not mention %q", err, w)
		}
	}
	if s := <-srv.sessions; slices.Contains(s.commands, "DATA") {
		t.Errorf("DATA sent after a rejected recipient: %v", s.commands)
	}
}

func TestSendSTARTTLSFailure(t *testing.T) {
	srv := startSMTPD(t, func(s *smtpd) { s.starttls = true })
	err := (Mailer{Addr: srv.addr(), From: "ingest@example.org"}).Send(context.Background(), []string{"a@example.org"}, "s", "b")
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") || !strings.Contains(err.Error(), srv.addr()) {
		t.Errorf("error = %v", err)
	}
	if s := <-srv.sessions; !slices.Equal(s.commands, []string{"EHLO", "STARTTLS"}) {
		t.Errorf("commands %v: nothing may follow a failed STARTTLS in the clear", s.commands)
	}
}

func TestSendUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	err = (Mailer{Addr: addr, From: "ingest@example.org"}).Send(context.Background(), []string{"a@example.org"}, "s", "b")
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connect") {
		t.Errorf("error = %v", err)
	}
}

func TestSendCancelledWhileServerIsSilent(t *testing.T) {
	srv := startSMTPD(t, func(s *smtpd) { s.silent = true })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-srv.accepted
		cancel()
	}()
	err := (Mailer{Addr: srv.addr(), From: "ingest@example.org"}).Send(ctx, []string{"a@example.org"}, "s", "b")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), srv.addr()) {
		t.Errorf("error = %v", err)
	}
}

func TestSendTimeout(t *testing.T) {
	srv := startSMTPD(t, func(s *smtpd) { s.silent = true })
	m := Mailer{Addr: srv.addr(), From: "ingest@example.org", Timeout: 50 * time.Millisecond}
	err := m.Send(context.Background(), []string{"a@example.org"}, "s", "b")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want the conversation's deadline", err)
	}
}

func TestSendBadInput(t *testing.T) {
	srv := startSMTPD(t, nil)
	tests := []struct {
		name string
		m    Mailer
		to   []string
		want string
	}{
		{"no port", Mailer{Addr: "127.0.0.1", From: "a@example.org"}, []string{"b@example.org"}, "server address"},
		{"bad From", Mailer{Addr: srv.addr(), From: "nobody"}, []string{"b@example.org"}, "sender"},
		{"no recipients", Mailer{Addr: srv.addr(), From: "a@example.org"}, nil, "no recipients"},
		{"bad To", Mailer{Addr: srv.addr(), From: "a@example.org"}, []string{"b@example.org", "not an address"}, `"not an address"`},
	}
	for _, tt := range tests {
		err := tt.m.Send(context.Background(), tt.to, "s", "b")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
	select {
	case s := <-srv.sessions:
		t.Errorf("bad input reached the server: %v", s.commands)
	default:
	}
}
