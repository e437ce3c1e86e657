package ocfl

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/ctxio"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/internal/s3test"
)

// BenchmarkOCFLPut stores 1,000 files of 4 KiB, and 10 of 8 MiB, as a new
// object per op into an OCFL store on a local place, beside the raw
// baseline: a durable copy of the same bytes (copy, fsync, folder fsync,
// as many at once as Put writes).
func BenchmarkOCFLPut(b *testing.B) {
	for _, c := range benchSets {
		files := benchFiles(b, c.n, c.size, c.parts)
		bytes := int64(c.n * c.size)
		b.Run(c.name+"/ocfl", func(b *testing.B) {
			s := openStore(b, b.TempDir())
			b.SetBytes(bytes)
			for i := 0; b.Loop(); i++ {
				if _, err := s.Put(context.Background(), storage.Object{ARK: fmt.Sprintf("ark:/99999/bench%d", i), Files: files}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/raw-durable-copy", func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(bytes)
			for i := 0; b.Loop(); i++ {
				if err := rawCopy(filepath.Join(dir, fmt.Sprint(i)), files); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchSets are the objects the benchmarks store.
var benchSets = []struct {
	name  string
	n     int
	size  int
	parts int // folders the files are spread over
}{
	{"1000x4KiB", 1000, 4 << 10, 10},
	{"10x8MiB", 10, 8 << 20, 1},
}

// BenchmarkOCFLPutS3 stores the same objects as BenchmarkOCFLPut into an
// OCFL store on S3 (versitygw on loopback, a fresh storage root per
// set), beside the raw baseline: plain minio-go PUTs of the same bytes
// into the same server, as many at once as Put writes, with no checksum.
func BenchmarkOCFLPutS3(b *testing.B) {
	srv := s3test.Start(b)
	srv.SetEnv(b)
	raw, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	runs := 0 // -count runs each sub-benchmark again: a fresh prefix each time
	for _, c := range benchSets {
		files := benchFiles(b, c.n, c.size, c.parts)
		bytes := int64(c.n * c.size)
		b.Run(c.name+"/ocfl", func(b *testing.B) {
			runs++
			pl, err := place.NewS3(b.Context(), srv.URL(srv.Addr, fmt.Sprintf("ocfl-%d", runs)))
			if err != nil {
				b.Fatal(err)
			}
			s, err := New(b.Context(), pl)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(bytes)
			for i := 0; b.Loop(); i++ {
				if _, err := s.Put(b.Context(), storage.Object{ARK: fmt.Sprintf("ark:/99999/bench%d", i), Files: files}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/raw-s3-put", func(b *testing.B) {
			runs++
			b.SetBytes(bytes)
			for i := 0; b.Loop(); i++ {
				if err := rawPuts(b.Context(), raw, srv.Bucket, fmt.Sprintf("raw-%d/%d", runs, i), files); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// rawPuts puts files under prefix with plain PUTs, copyParallel at once.
func rawPuts(ctx context.Context, c *minio.Client, bucket, prefix string, files []storage.File) error {
	return eachFile(ctx, files, func(ctx context.Context, f storage.File, src *os.File) error {
		_, err := c.PutObject(ctx, bucket, prefix+"/"+f.Name, src, f.Size, minio.PutObjectOptions{DisableContentSha256: true})
		return err
	})
}

// rawCopy copies files under dir, each synced, then every folder synced.
func rawCopy(dir string, files []storage.File) error {
	dirs := map[string]bool{}
	for _, f := range files {
		d := filepath.Dir(filepath.Join(dir, f.Name))
		if !dirs[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			dirs[d] = true
		}
	}
	err := eachFile(context.Background(), files, func(ctx context.Context, f storage.File, src *os.File) error {
		dst, err := os.Create(filepath.Join(dir, f.Name))
		if err != nil {
			return err
		}
		_, _, err = ctxio.CopySHA256(ctx, dst, src) // Put hashes too
		if err == nil {
			err = dst.Sync()
		}
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return err
	}
	for d := range dirs {
		if err := durable.SyncDir(d); err != nil {
			return err
		}
	}
	return durable.SyncDir(filepath.Dir(dir))
}

// eachFile runs fn on every file with its source open, copyParallel at
// once, as Put copies them.
func eachFile(ctx context.Context, files []storage.File, fn func(context.Context, storage.File, *os.File) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyParallel)
	for _, f := range files {
		g.Go(func() error {
			src, err := os.Open(f.Path)
			if err != nil {
				return err
			}
			defer src.Close()
			return fn(gctx, f, src)
		})
	}
	return g.Wait()
}

// benchFiles writes n random files of size bytes in parts folders.
func benchFiles(b *testing.B, n, size, parts int) []storage.File {
	dir := b.TempDir()
	buf := make([]byte, size)
	files := make([]storage.File, n)
	for i := range files {
		rand.Read(buf)
		name := fmt.Sprintf("producer/d%02d/f%04d.bin", i%parts, i)
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
		files[i] = storage.File{Name: name, Path: p, Size: int64(size), SHA256: digest(buf)}
	}
	return files
}
