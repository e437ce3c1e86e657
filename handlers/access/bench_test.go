package access_test

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingestq/ingestq/internal/storagetest"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// BenchmarkAccessPackage asks for a stored object's whole package as a zip
// through the queue: one op is a request made with the service layer
// until its Completed event (estimate, queue, assembly with the stored
// files' fixity checked, the package's SHA-256, its verification by a
// second read, publication). Each op is followed, untimed, by the
// baseline: the floor of any zip of the same files, read through the same
// storage reader and written with archive/zip (stored, not deflated, as
// ingestq's are) into a file, synced. pct-of-baseline is ingestq's
// throughput as a percentage of the baseline's. Each object is read from
// the OCFL root in the data folder, and (storage=service) from ingestq's
// storage service on loopback; B/op, far below the object's size, says
// the package streams.
//
//	go test -run '^$' -bench AccessPackage -benchtime 5x -count 3 ./handlers/access/
func BenchmarkAccessPackage(b *testing.B) {
	for _, set := range []struct {
		name        string
		files, size int
	}{
		{"files=1000,size=4KiB", 1000, 4 << 10},
		{"files=10,size=8MiB", 10, 8 << 20},
	} {
		b.Run(set.name, func(b *testing.B) { benchAccessPackage(b, rigConfig{}, set.files, set.size) })
		b.Run(set.name+",storage=service", func(b *testing.B) {
			benchAccessPackage(b, rigConfig{storage: []string{storagetest.Start(b, nil).URL}}, set.files, set.size)
		})
	}
}

func benchAccessPackage(b *testing.B, c rigConfig, count, size int) {
	r := newRig(b, c)
	files := map[string][]byte{}
	for i := range count {
		data := make([]byte, size)
		for k := range data {
			data[k] = byte(i*31 + k*7 + k>>9)
		}
		files[fmt.Sprintf("d%02d/f%04d.bin", i/100, i)] = data
	}
	ark := r.deposit("bench", files)
	dir := b.TempDir()
	b.SetBytes(int64(count * size))
	b.ReportAllocs()
	b.ResetTimer()
	var baseline time.Duration
	for i := range b.N {
		v, e := r.request(ops.AccessRequest{ARK: ark, Format: queue.FormatZip})
		if e.To != string(queue.Completed) {
			b.Fatalf("request %s: %s: %s", v.Ref, e.To, e.Message)
		}
		b.StopTimer()
		start := time.Now()
		if err := zipStored(r, ark, filepath.Join(dir, fmt.Sprintf("%d.zip", i))); err != nil {
			b.Fatal(err)
		}
		baseline += time.Since(start)
		if _, err := r.ops.DeleteAccess(b.Context(), v.Ref); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(baseline.Milliseconds())/float64(b.N), "baseline-ms/op")
	b.ReportMetric(100*baseline.Seconds()/b.Elapsed().Seconds(), "pct-of-baseline")
}

// zipStored writes the latest version of ark as a zip to path, synced:
// the baseline's plain copy, no digest and no second read.
func zipStored(r *rig, ark, path string) error {
	src, err := r.p.ReaderFor(r.t.Context(), "demo")
	if err != nil {
		return err
	}
	o, err := src.Read(r.t.Context(), ark)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	zw := zip.NewWriter(f)
	vs := o.Versions()
	last := vs[len(vs)-1]
	for _, file := range last.Files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: file.Name, Method: zip.Store})
		if err != nil {
			return err
		}
		rc, err := o.Open(r.t.Context(), last.Number, file.Name)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Sync()
}
