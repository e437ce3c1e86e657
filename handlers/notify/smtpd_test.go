package notify

import (
	"bufio"
	"encoding/base64"
	"net"
	"strings"
	"sync"
	"testing"
)

// smtpd is a minimal SMTP responder for the tests: it answers EHLO/HELO,
// AUTH PLAIN, MAIL FROM, RCPT TO, DATA and QUIT, and records each session.
type smtpd struct {
	ln       net.Listener
	sessions chan *session // one per connection, sent when it ends

	rejectRcpt string // RCPT TO this address gets 550
	starttls   bool   // offer STARTTLS, then hang up instead of a handshake
	auth       bool   // offer AUTH PLAIN
	silent     bool   // never greet; report the connection on accepted
	accepted   chan struct{}

	wg sync.WaitGroup
}

// session is what the server saw of one connection.
type session struct {
	commands []string // verbs in order, e.g. EHLO, MAIL, RCPT, DATA, QUIT
	helo     string
	auth     string // decoded PLAIN response
	from     string
	rcpts    []string
	wire     []string // DATA lines as sent, still dot-stuffed
	message  string   // DATA with dot-stuffing undone, CRLF line ends
}

func startSMTPD(t *testing.T, configure func(*smtpd)) *smtpd {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpd{ln: ln, sessions: make(chan *session, 16), accepted: make(chan struct{}, 16)}
	if configure != nil {
		configure(s)
	}
	s.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // listener closed
			}
			s.wg.Go(func() { s.sessions <- s.serve(conn) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *smtpd) addr() string { return s.ln.Addr().String() }

func (s *smtpd) serve(conn net.Conn) *session {
	defer conn.Close()
	sess := &session{}
	r := bufio.NewReader(conn)
	reply := func(lines ...string) {
		for _, l := range lines {
			_, _ = conn.Write([]byte(l + "\r\n"))
		}
	}
	if s.silent {
		s.accepted <- struct{}{}
		_, _ = r.ReadString(0) // until the client gives up and closes
		return sess
	}
	reply("220 test.invalid ESMTP ready")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return sess
		}
		line = strings.TrimRight(line, "\r\n")
		verb, arg, _ := strings.Cut(line, " ")
		verb = strings.ToUpper(verb)
		sess.commands = append(sess.commands, verb)
		switch verb {
		case "EHLO":
			sess.helo = arg
			ext := []string{"250-test.invalid greets " + arg}
			if s.starttls {
				ext = append(ext, "250-STARTTLS")
			}
			if s.auth {
				ext = append(ext, "250-AUTH PLAIN")
			}
			reply(append(ext, "250 HELP")...)
		case "HELO":
			sess.helo = arg
			reply("250 test.invalid")
		case "STARTTLS":
			reply("220 go ahead")
			return sess // and hang up: the client's handshake fails
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			dec, err := base64.StdEncoding.DecodeString(resp)
			if mech != "PLAIN" || err != nil {
				reply("504 unsupported")
				continue
			}
			sess.auth = string(dec)
			reply("235 2.7.0 authenticated")
		case "MAIL":
			sess.from = angle(arg)
			reply("250 2.1.0 ok")
		case "RCPT":
			to := angle(arg)
			if to == s.rejectRcpt {
				reply("550 5.1.1 <" + to + ">: no such user")
				continue
			}
			sess.rcpts = append(sess.rcpts, to)
			reply("250 2.1.5 ok")
		case "DATA":
			reply("354 end with <CRLF>.<CRLF>")
			var msg strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return sess
				}
				if l == ".\r\n" {
					break
				}
				sess.wire = append(sess.wire, strings.TrimSuffix(l, "\r\n"))
				msg.WriteString(strings.TrimPrefix(l, ".")) // undo dot-stuffing
			}
			sess.message = msg.String()
			reply("250 2.0.0 queued")
		case "RSET", "NOOP":
			reply("250 ok")
		case "QUIT":
			reply("221 bye")
			return sess
		default:
			reply("502 5.5.2 not implemented")
		}
	}
}

// angle extracts the address from "FROM:<a@b> BODY=8BITMIME" or "TO:<a@b>".
func angle(arg string) string {
	_, rest, _ := strings.Cut(arg, "<")
	addr, _, _ := strings.Cut(rest, ">")
	return addr
}
