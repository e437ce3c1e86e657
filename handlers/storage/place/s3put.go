package place

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
)

// abortTimeout bounds the clean-up of a failed multipart upload, which runs
// even when the caller's context has ended.
const abortTimeout = 30 * time.Second

// Put writes r to key. The bytes are read one part (partsize) at a time,
// hashed as read, and sent with their SHA-256 checksum
// (x-amz-checksum-sha256), which the store verifies before keeping them:
//
//   - up to one part: a single PUT carrying the caller's digest, sent only
//     once r has yielded exactly size bytes with that digest;
//   - larger: a multipart upload, each part with its own checksum; it is
//     completed only when r has yielded size bytes with the caller's digest
//     (else aborted), and the store's composite checksum (the SHA-256 of the
//     parts' SHA-256s, "-N") must be the one computed here.
//
// A store that answers without a checksum is checked by reading the object
// back. A mismatch anywhere returns ErrDigest, and nothing written by this
// Put stays at key.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, sha256Hex string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	want, err := parseSHA256(sha256Hex)
	if err == nil && size < 0 {
		err = fmt.Errorf("negative size %d", size)
	}
	if err != nil {
		return fmt.Errorf("place %s: put %s: %w", s, key, err)
	}
	u := &upload{s: s, obj: obj, size: size, want: want, in: &digestReader{r: r, h: sha256.New()}}
	if size <= s.partSize {
		err = u.single(ctx)
	} else {
		err = u.multipart(ctx)
	}
	if err != nil {
		return fmt.Errorf("place %s: put %s: %w", s, key, s.asked.busy(err))
	}
	return nil
}

func parseSHA256(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != s {
		return nil, fmt.Errorf("sha256 %q is not 64 lower-case hex digits", s)
	}
	return b, nil
}

// upload is one Put in progress.
type upload struct {
	s    *S3
	obj  string
	size int64
	want []byte // the caller's SHA-256
	in   *digestReader
}

// digestReader counts and hashes what is read through it.
type digestReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	d.n += int64(n)
	return n, err
}

// read fills buf from the input; an input that ends early is a mismatch.
func (u *upload) read(buf []byte) error {
	_, err := io.ReadFull(u.in, buf)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return u.mismatch("input ended early")
	}
	return err
}

// end confirms that the input ends here, after size bytes with the
// caller's digest.
func (u *upload) end() error {
	var one [1]byte
	_, err := io.ReadFull(u.in, one[:])
	switch {
	case err == nil:
		return u.mismatch("input goes on")
	case !errors.Is(err, io.EOF):
		return err
	case !bytes.Equal(u.in.h.Sum(nil), u.want):
		return u.mismatch("other content")
	}
	return nil
}

// mismatch is the ErrDigest for what the input gave so far.
func (u *upload) mismatch(what string) error {
	return fmt.Errorf("%w: %s: read %d bytes with sha256 %x; expected %d bytes with sha256 %x",
		ErrDigest, what, u.in.n, u.in.h.Sum(nil), u.size, u.want)
}

// single sends a file of at most one part in one PUT.
func (u *upload) single(ctx context.Context) error {
	buf := make([]byte, u.size)
	if err := u.read(buf); err != nil {
		return err
	}
	if err := u.end(); err != nil {
		return err
	}
	sum := base64.StdEncoding.EncodeToString(u.want)
	opts := minio.PutObjectOptions{
		UserMetadata:         map[string]string{"x-amz-checksum-sha256": sum},
		DisableContentSha256: true, // the checksum protects the body
	}
	info, err := u.s.core.PutObject(ctx, u.s.bucket, u.obj, bytes.NewReader(buf), u.size, "", "", opts)
	if err != nil {
		return refused(err)
	}
	return u.confirm(ctx, info.ChecksumSHA256, sum)
}

// multipart sends the file in parts of partSize, each with its checksum.
func (u *upload) multipart(ctx context.Context) (err error) {
	c, bucket := u.s.core, u.s.bucket
	opts := minio.PutObjectOptions{UserMetadata: map[string]string{"x-amz-checksum-algorithm": "SHA256"}}
	id, err := c.NewMultipartUpload(ctx, bucket, u.obj, opts)
	if err != nil {
		return err
	}
	completed := false
	defer func() {
		if !completed {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
			defer cancel()
			if aerr := c.AbortMultipartUpload(actx, bucket, u.obj, id); aerr != nil {
				err = fmt.Errorf("%w (and abort of upload %s: %v)", err, id, aerr)
			}
		}
	}()
	parts, composite, err := u.sendParts(ctx, id)
	if err != nil {
		return err
	}
	if err := u.end(); err != nil {
		return err
	}
	info, err := c.CompleteMultipartUpload(ctx, bucket, u.obj, id, parts, minio.PutObjectOptions{})
	if err != nil {
		return refused(err)
	}
	completed = true
	return u.confirm(ctx, info.ChecksumSHA256, composite)
}

// sendParts uploads the input in parts and returns them with the composite
// checksum the store should answer.
func (u *upload) sendParts(ctx context.Context, id string) ([]minio.CompletePart, string, error) {
	var parts []minio.CompletePart
	composite := sha256.New()
	buf := make([]byte, u.s.partSize)
	for sent := int64(0); sent < u.size; {
		part := buf[:min(u.s.partSize, u.size-sent)]
		if err := u.read(part); err != nil {
			return nil, "", err
		}
		digest := sha256.Sum256(part)
		sum := base64.StdEncoding.EncodeToString(digest[:])
		opts := minio.PutObjectPartOptions{
			CustomHeader:         http.Header{"X-Amz-Checksum-Sha256": {sum}},
			DisableContentSha256: true,
		}
		n := len(parts) + 1
		p, err := u.s.core.PutObjectPart(ctx, u.s.bucket, u.obj, id, n, bytes.NewReader(part), int64(len(part)), opts)
		if err != nil {
			return nil, "", refused(err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: n, ETag: p.ETag, ChecksumSHA256: sum})
		composite.Write(digest[:])
		sent += int64(len(part))
	}
	sum := base64.StdEncoding.EncodeToString(composite.Sum(nil)) + "-" + strconv.Itoa(len(parts))
	return parts, sum, nil
}

// refused marks the store's refusal of a checksum as ErrDigest.
func refused(err error) error {
	switch s3Code(err) {
	case "BadDigest", "XAmzContentSHA256Mismatch":
		return fmt.Errorf("%w: the store refused the bytes it got: %w", ErrDigest, err)
	}
	return err
}

// confirm checks the checksum the store answered for the object written; a
// store that answered none is checked by reading the object back.
func (u *upload) confirm(ctx context.Context, answered, expected string) error {
	switch answered {
	case expected:
		return nil
	case "":
		return u.readBack(ctx)
	}
	return u.remove(ctx, fmt.Errorf("%w: the store answered checksum %s; expected %s", ErrDigest, answered, expected))
}

// readBack reads the object written and compares its size and SHA-256.
func (u *upload) readBack(ctx context.Context) error {
	body, _, _, err := u.s.core.GetObject(ctx, u.s.bucket, u.obj, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	defer body.Close()
	h := sha256.New()
	n, err := io.Copy(h, body)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if n != u.size || !bytes.Equal(h.Sum(nil), u.want) {
		return u.remove(ctx, fmt.Errorf("%w: read back %d bytes with sha256 %x; expected %d bytes with sha256 %x",
			ErrDigest, n, h.Sum(nil), u.size, u.want))
	}
	return nil
}

// remove deletes the object written, which failed verification, and
// returns why.
func (u *upload) remove(ctx context.Context, why error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	if err := u.s.core.RemoveObject(dctx, u.s.bucket, u.obj, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("%w (and its removal: %v)", why, err)
	}
	return why
}
