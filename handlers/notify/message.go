package notify

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"
)

// maxLine is RFC 5321's limit on a line of the message, CRLF excluded.
const maxLine = 998

// compose renders the message headers and body with CRLF line ends.
func compose(from *mail.Address, to []*mail.Address, subject, body string, now time.Time) []byte {
	subject = strings.ToValidUTF8(subject, "\uFFFD")
	body = strings.ToValidUTF8(body, "\uFFFD")
	// One line-end convention, so both encodings below see the same lines.
	body = strings.ReplaceAll(body, "\r\n", "\n")
	body = strings.ReplaceAll(body, "\r", "\n")

	addrs := make([]string, len(to))
	for i, a := range to {
		addrs[i] = a.String() // RFC 2047-encodes a non-ASCII display name
	}
	var b bytes.Buffer
	header := func(name, value string) {
		b.WriteString(name + ": " + value + "\r\n")
	}
	header("From", from.String())
	header("To", strings.Join(addrs, ",\r\n ")) // folded: long lists stay under the line limit
	// QEncoding leaves ASCII alone and encodes the rest, including CR and
	// LF, so a subject can never start a new header.
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", messageID(from.Address))
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	if plainASCII(body) {
		header("Content-Transfer-Encoding", "7bit")
		b.WriteString("\r\n")
		b.WriteString(strings.ReplaceAll(body, "\n", "\r\n"))
	} else {
		// Quoted-printable passes through servers without 8BITMIME and
		// breaks over-long lines.
		header("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		qp := quotedprintable.NewWriter(&b)
		_, _ = qp.Write([]byte(body)) // writes to a bytes.Buffer do not fail
		_ = qp.Close()
	}
	if !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// plainASCII reports whether body can be sent as 7bit: ASCII lines no
// longer than maxLine.
func plainASCII(body string) bool {
	for line := range strings.SplitSeq(body, "\n") {
		if len(line) > maxLine {
			return false
		}
		for i := 0; i < len(line); i++ {
			if line[i] >= 0x80 || line[i] == 0 {
				return false
			}
		}
	}
	return true
}

// messageID returns a unique <random@domain> using the sender's domain.
func messageID(sender string) string {
	domain := "localhost"
	if at := strings.LastIndexByte(sender, '@'); at >= 0 && at < len(sender)-1 {
		domain = sender[at+1:]
	}
	var r [16]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read does not fail
	return "<" + hex.EncodeToString(r[:]) + "@" + domain + ">"
}
