package place

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/minio/minio-go/v7"
)

// BenchmarkS3Put puts 1,000 files of 4 KiB and 10 of 8 MiB, one at a time,
// through the S3 place (checksum sent and confirmed) and, beside it, as
// plain minio-go PUTs of the same bytes with no checksum at all, and with
// only the checksum header, into the same versitygw. make bench-place runs it (PERFORMANCE.md).
func BenchmarkS3Put(b *testing.B) {
	srv := s3test.Start(b)
	srv.SetEnv(b)
	p, err := NewS3(b.Context(), srv.URL(srv.Addr, "place"))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	for _, set := range []struct {
		name    string
		n, size int
	}{{"1000x4KiB", 1000, 4 << 10}, {"10x8MiB", 10, 8 << 20}} {
		files, sums := benchFiles(b, set.n, set.size)
		b.Run(set.name+"/place", func(b *testing.B) {
			benchPuts(b, files, func(key string, f []byte, i int) error {
				return p.Put(b.Context(), key, bytes.NewReader(f), int64(len(f)), sums[i])
			})
		})
		b.Run(set.name+"/raw", func(b *testing.B) {
			opts := minio.PutObjectOptions{DisableContentSha256: true}
			benchPuts(b, files, func(key string, f []byte, _ int) error {
				_, err := raw.PutObject(b.Context(), srv.Bucket, "raw/"+key, bytes.NewReader(f), int64(len(f)), opts)
				return err
			})
		})
		b.Run(set.name+"/raw+checksum", func(b *testing.B) { // the store's share of the place's cost
			benchPuts(b, files, func(key string, f []byte, i int) error {
				digest, _ := hex.DecodeString(sums[i])
				opts := minio.PutObjectOptions{DisableContentSha256: true, UserMetadata: map[string]string{
					"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(digest)}}
				core := minio.Core{Client: raw} // the plain client refuses a checksum without trailers
				_, err := core.PutObject(b.Context(), srv.Bucket, "raw/"+key, bytes.NewReader(f), int64(len(f)), "", "", opts)
				return err
			})
		})
	}
}

// benchPuts puts every file once per round under a fresh key and reports
// the files per second.
func benchPuts(b *testing.B, files [][]byte, put func(key string, f []byte, i int) error) {
	b.SetBytes(int64(len(files) * len(files[0])))
	round := 0
	for b.Loop() {
		for i, f := range files {
			if err := put(fmt.Sprintf("%s/%d/%d", b.Name(), round, i), f, i); err != nil {
				b.Fatal(err)
			}
		}
		round++
	}
	b.ReportMetric(float64(round*len(files))/b.Elapsed().Seconds(), "files/s")
}

func benchFiles(b *testing.B, n, size int) ([][]byte, []string) {
	files, sums := make([][]byte, n), make([]string, n)
	for i := range files {
		files[i] = make([]byte, size)
		if _, err := rand.Read(files[i]); err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(files[i])
		sums[i] = hex.EncodeToString(sum[:])
	}
	return files, sums
}
