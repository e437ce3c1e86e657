package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"os"
	"sync"
)

// sourceError is a local file that cannot be sent as declared: missing,
// unreadable, or not matching its size or digest.
type sourceError struct{ err error }

func (e sourceError) Error() string { return e.err.Error() }
func (e sourceError) Unwrap() error { return e.err }

// bodies makes the request bodies of one Put and makes sure none of their
// writers outlives it: the caller may remove the files once Put returns.
type bodies struct {
	boundary string
	meta     []byte
	files    []File
	fail     context.CancelCauseFunc

	mu      sync.Mutex
	streams []*partStream
	writers sync.WaitGroup
}

// open returns a new body for one attempt.
func (b *bodies) open() (io.Reader, error) {
	pr, pw := io.Pipe()
	s := &partStream{pr: pr, pw: pw, b: b}
	b.mu.Lock()
	b.streams = append(b.streams, s)
	b.mu.Unlock()
	return s, nil
}

// finish ends every attempt's writer and waits for them.
func (b *bodies) finish() {
	b.mu.Lock()
	for _, s := range b.streams {
		s.Close()
	}
	b.mu.Unlock()
	b.writers.Wait()
}

// partStream is one attempt's body: a pipe fed by a goroutine that writes
// the multipart parts straight from the files, so nothing is held in
// memory. The goroutine starts on the first Read (the client builds one body
// it never sends) and ends when the body is closed or fully written.
type partStream struct {
	once sync.Once
	pr   *io.PipeReader
	pw   *io.PipeWriter
	b    *bodies
}

func (s *partStream) Read(p []byte) (int, error) {
	s.once.Do(func() {
		s.b.writers.Add(1)
		go s.write()
	})
	return s.pr.Read(p)
}

// Close ends the attempt; a writer blocked on the pipe then returns.
func (s *partStream) Close() error {
	s.once.Do(func() {}) // an unread body never starts its writer
	return s.pr.Close()
}

func (s *partStream) write() {
	defer s.b.writers.Done()
	s.pw.CloseWithError(s.writeParts(s.b))
}

func (s *partStream) writeParts(b *bodies) error {
	mw := multipart.NewWriter(s.pw)
	if err := mw.SetBoundary(b.boundary); err != nil {
		return err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="version"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(b.meta); err != nil {
		return err
	}
	for _, f := range b.files {
		w, err := mw.CreateFormFile("file", f.Name)
		if err != nil {
			return err
		}
		if err := sendFile(w, f); err != nil {
			if src, ok := err.(sourceError); ok {
				b.fail(src)
			}
			return err
		}
	}
	return mw.Close()
}

// sendFile copies f to w, checking size and digest; errors on f's side are
// sourceError, errors on w's side (the transport gave up) are returned as is.
func sendFile(w io.Writer, f File) error {
	src, err := os.Open(f.Path)
	if err != nil {
		return sourceError{fmt.Errorf("file %q: %w", f.Name, err)}
	}
	defer src.Close()
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			if _, err := w.Write(buf[:k]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return sourceError{fmt.Errorf("file %q: read %s: %w", f.Name, f.Path, rerr)}
		}
	}
	if n != f.Size {
		return sourceError{fmt.Errorf("file %q: %s has %d bytes, expected %d", f.Name, f.Path, n, f.Size)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return sourceError{fmt.Errorf("file %q: %s has sha256 %s, expected %s", f.Name, f.Path, got, f.SHA256)}
	}
	return nil
}
