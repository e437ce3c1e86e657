package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// BenchmarkDownload compares Client.Download (sha256 and size checked,
// fsynced, renamed) with plain http.Get + io.Copy of the same bytes from the
// same loopback server, 8 transfers at a time. One op is the whole set of
// files; MB/s counts their bytes.
//
//	go test -run '^$' -bench Download -benchtime 3x ./handlers/fetch/
func BenchmarkDownload(b *testing.B) {
	const parallel = 8
	for _, set := range []struct {
		files, size int
		name        string
	}{
		{1000, 64 << 10, "files=1000,size=64KiB"},
		{10, 16 << 20, "files=10,size=16MiB"},
	} {
		b.Run(set.name, func(b *testing.B) {
			data := payload(set.size, 90)
			sum := sha256.Sum256(data)
			digest := hex.EncodeToString(sum[:])
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(data)))
				w.Write(data)
			}))
			defer srv.Close()

			c := New(Config{PerHost: parallel, Allow: Loopback})
			want := Want{Alg: "sha256", Digest: digest, Size: int64(len(data))}
			plain := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: parallel, DisableCompression: true}}
			kinds := []struct {
				name string
				one  func(url, path string) error
			}{
				{"fetch", func(url, path string) error {
					_, err := c.Download(context.Background(), url, path, want, nil)
					return err
				}},
				{"iocopy", func(url, path string) error { return plainCopy(plain, url, path, "", false) }},
				{"iocopy+sha256", func(url, path string) error { return plainCopy(plain, url, path, digest, false) }},
				{"iocopy+sha256+fsync", func(url, path string) error { return plainCopy(plain, url, path, digest, true) }},
			}
			for _, k := range kinds {
				b.Run(k.name, func(b *testing.B) {
					b.SetBytes(int64(set.files * set.size))
					b.ReportAllocs()
					root := b.TempDir()
					for i := range b.N {
						dir := filepath.Join(root, strconv.Itoa(i))
						if err := os.Mkdir(dir, 0o755); err != nil {
							b.Fatal(err)
						}
						if err := runAll(set.files, parallel, func(j int) error {
							return k.one(fmt.Sprintf("%s/f%d", srv.URL, j), filepath.Join(dir, strconv.Itoa(j)))
						}); err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
						os.RemoveAll(dir)
						b.StartTimer()
					}
				})
			}
		})
	}
}

// runAll calls one(0…n-1) from parallel goroutines.
func runAll(n, parallel int, one func(int) error) error {
	jobs := make(chan int)
	errs := make(chan error, parallel)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for j := range jobs {
				if err := one(j); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for j := range n {
			select {
			case jobs <- j:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	return <-errs
}

// plainCopy is the baseline: GET and copy into path, optionally hashing and
// making the file durable the way Download does (.part, fsync, rename,
// directory fsync).
func plainCopy(client *http.Client, url, path, digest string, durable bool) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	tmp := path
	if durable {
		tmp += ".part"
	}
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	var w io.Writer = f
	h := sha256.New()
	if digest != "" {
		w = io.MultiWriter(f, h)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return err
	}
	if digest != "" && hex.EncodeToString(h.Sum(nil)) != digest {
		return fmt.Errorf("%s: digest mismatch", url)
	}
	if !durable {
		return f.Close()
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
