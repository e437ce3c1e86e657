package handlers_test

import (
	"bufio"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/notify"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// smtpSink is a minimal SMTP server: no extensions (so no STARTTLS), and
// every message accepted and recorded.
type smtpSink struct {
	addr    string
	accepts atomic.Int32
	msgs    chan sunkMail
}

type sunkMail struct {
	from  string
	rcpts []string
	data  string // dot-unstuffed, CRLF line ends
}

// read is the message's subject and body as its reader reads them:
// decoded, the body with \n line ends.
func (m sunkMail) read(t *testing.T) (subject, body string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(m.data))
	if err != nil {
		t.Fatalf("message %q: %v", m.data, err)
	}
	if subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil {
		t.Fatalf("subject %q: %v", msg.Header.Get("Subject"), err)
	}
	var rd io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		rd = quotedprintable.NewReader(rd)
	}
	raw, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return subject, strings.ReplaceAll(string(raw), "\r\n", "\n")
}

// mailsTo is a rig option: the pipeline e-mails its reports to sink.
func mailsTo(sink *smtpSink) rigOption {
	return func(hc *handlers.Config, _ *reactor.Config) {
		hc.Mailer = &notify.Mailer{Addr: sink.addr, From: "ingestq@example.org"}
	}
}

func startSMTPSink(t *testing.T) *smtpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpSink{addr: ln.Addr().String(), msgs: make(chan sunkMail, 16)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // listener closed
			}
			s.accepts.Add(1) // before the greeting: no client gets further unseen
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

func (s *smtpSink) serve(c net.Conn) {
	defer c.Close()
	rd := bufio.NewReader(c)
	reply := func(line string) { _, _ = io.WriteString(c, line+"\r\n") }
	read := func() (string, bool) {
		l, err := rd.ReadString('\n')
		return strings.TrimRight(l, "\r\n"), err == nil
	}
	angle := func(l string) string { // the <address> of MAIL FROM / RCPT TO
		_, a, _ := strings.Cut(l, "<")
		a, _, _ = strings.Cut(a, ">")
		return a
	}
	reply("220 sink ESMTP")
	var m sunkMail
	for {
		l, ok := read()
		if !ok {
			return
		}
		switch verb, _, _ := strings.Cut(strings.ToUpper(l), " "); strings.TrimSuffix(verb, ":") {
		case "EHLO", "HELO":
			reply("250 sink")
		case "MAIL":
			m = sunkMail{from: angle(l)}
			reply("250 OK")
		case "RCPT":
			m.rcpts = append(m.rcpts, angle(l))
			reply("250 OK")
		case "DATA":
			reply("354 end with <CRLF>.<CRLF>")
			var b strings.Builder
			for {
				l, ok := read()
				if !ok {
					return
				}
				if l == "." {
					break
				}
				b.WriteString(strings.TrimPrefix(l, ".") + "\r\n") // undo dot-stuffing
			}
			m.data = b.String()
			s.msgs <- m // before the 250: once Send returns, the message is here
			reply("250 queued")
		case "RSET", "NOOP":
			reply("250 OK")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 not implemented")
		}
	}
}

// reportBatch submits a single-file batch of two good files and one whose
// digest is wrong, and waits for it to end Failed.
func reportBatch(t *testing.T, r *rig) (*queue.Batch, map[string]*queue.Job) {
	t.Helper()
	var rows []row
	for _, name := range []string{"one.txt", "two.txt", "bad.txt"} {
		data := []byte("content of " + name + "\n")
		rw := fileRow(r.content.put("/r/"+name, data), name, data)
		rw.local = "local-" + name
		if name == "bad.txt" {
			s := md5.Sum([]byte("something else"))
			rw.digest = hex.EncodeToString(s[:])
		}
		rows = append(rows, rw)
	}
	b := r.submit(r.content.put("/report.checkm", manifest("mrt-single-file-batch-manifest", rows...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Failed {
		t.Fatalf("batch %s (%s), want Failed", b.State(), b.Status.Message)
	}
	byName := map[string]*queue.Job{}
	for _, j := range r.jobsOf(b.ID) {
		byName[j.Config.Map()["file_name"].(string)] = j
	}
	if len(byName) != 3 {
		t.Fatalf("jobs %v, want 3", byName)
	}
	return b, byName
}

func TestReportEmail(t *testing.T) {
	t.Parallel()
	r, sink := mailingRig(t)
	tap := estTap(t, r, "ingestq.batch.failed.>")
	b, jobs := reportBatch(t, r)
	bad := jobs["bad.txt"]
	if bad.State() != queue.Failed || !strings.Contains(bad.Status.Message, "md5 mismatch") {
		t.Fatalf("bad.txt job %s: %q, want Failed with an md5 mismatch", bad.State(), bad.Status.Message)
	}
	arks := map[string]string{}
	for _, name := range []string{"one.txt", "two.txt"} {
		arks[jobs[name].ID] = r.checkStored(jobs[name], object{name: []byte("content of " + name + "\n")})
	}
	if strings.Contains(b.Status.Message, "not delivered") {
		t.Errorf("batch message %q: the report was not delivered", b.Status.Message)
	}

	// The report's event, published after the report was sent.
	e := estCollect(t, r, tap, []string{b.ID}, func(e events.Event) string {
		if e.Kind == events.KindBatch && e.From == string(queue.Reporting) {
			return e.BatchID
		}
		return ""
	})[b.ID]
	failures, _ := e.Attrs["failures"].(map[string]any)
	if len(failures) != 1 || failures[bad.ID] != bad.Status.Message {
		t.Errorf("event failures %v, want {%s: %q}", e.Attrs["failures"], bad.ID, bad.Status.Message)
	}
	failedObjects, _ := e.Attrs["failed_objects"].(map[string]any)
	if o, _ := failedObjects[bad.ID].(map[string]any); len(failedObjects) != 1 || fmt.Sprint(o["local_id"]) != "[local-bad.txt]" {
		t.Errorf("event failed_objects %v, want {%s: its local id local-bad.txt}", e.Attrs["failed_objects"], bad.ID)
	}

	// Report runs before the batch moves, and the sink records the message
	// before accepting it: it is here already.
	var m sunkMail
	select {
	case m = <-sink.msgs:
	default:
		t.Fatalf("no report e-mailed (%d connections)", sink.accepts.Load())
	}
	select {
	case extra := <-sink.msgs:
		t.Errorf("a second message was sent: %q", extra.data)
	default:
	}
	if m.from != "ingestq@example.org" || !slices.Equal(m.rcpts, []string{"curator@example.org"}) {
		t.Errorf("envelope from %q to %v, want ingestq@example.org to [curator@example.org]", m.from, m.rcpts)
	}
	subject, text := m.read(t)
	if !strings.Contains(subject, b.ID) || !strings.Contains(subject, "1 failed") || !strings.Contains(subject, "2 completed") {
		t.Errorf("subject %q: want the batch id %s, 2 completed and 1 failed", subject, b.ID)
	}
	lines := strings.Split(text, "\n")
	// A job's line names its id and, when it has one, its ARK.
	lineOf := func(jid string) int {
		return slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), jid+" ") })
	}
	for jid, ark := range arks {
		if i := lineOf(jid); i < 0 || !strings.Contains(lines[i], ark) {
			t.Errorf("body does not list completed job %s with %s:\n%s", jid, ark, text)
		}
	}
	if i := lineOf(bad.ID); i < 0 || i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "reason: "+bad.Status.Message {
		t.Errorf("body does not list failed job %s with reason %q:\n%s", bad.ID, bad.Status.Message, text)
	}
	if !strings.Contains(text, "Completed (2):") || !strings.Contains(text, "Failed (1):") {
		t.Errorf("body lacks the completed and failed sections:\n%s", text)
	}
}

// A profile that names no one gets no mail, even with a mailer configured.
func TestReportNoMailWithoutAddresses(t *testing.T) {
	t.Parallel()
	sink := startSMTPSink(t)
	r := newRig(t, profile.Default(), mailsTo(sink))
	b, _ := reportBatch(t, r)
	// The batch has moved, so Report has returned: a mail would have
	// connected (and been counted) by now.
	if n := sink.accepts.Load(); n != 0 {
		t.Errorf("%d SMTP connections, want none", n)
	}
	if b.Report == nil || len(b.Report.FailedJobs) != 1 || len(b.Report.SuccessfulJobs) != 2 {
		t.Errorf("report %+v, want 2 completed and 1 failed", b.Report)
	}
	if strings.Contains(b.Status.Message, "not delivered") {
		t.Errorf("batch message %q: a delivery was tried", b.Status.Message)
	}
}
