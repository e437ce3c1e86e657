package audit_test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/handlers/audit"
)

// BenchmarkAudit audits objects in two local OCFL roots (a primary and a
// replica) with the bbolt inventory: a few files of mixed sizes each, a
// 1 MiB one in every other object, a second version in every fifth. One
// op is a walk of every object:
//
//   - baseline-read-hash: the least a fixity check can do, each content
//     file of both roots found with os.ReadDir, read with os.Open and
//     hashed with SHA-256, audit.Defaults.Parallel files at once;
//   - audit: the audit without fixity (the OCFL inventories against the
//     record);
//   - audit-fixity: with fixity, every stored byte read back and hashed;
//   - audit-fixity-record: and a fixity check event of each version at
//     each target written into the inventory (which grows by these events
//     each op).
//
// Each op of the fixity audits is followed, untimed, by the baseline:
// pct-of-baseline is the audit's rate as a percentage of the baseline's,
// run in turn. The files were just written, so the page cache is warm for
// both sides alike (dropping it takes root). -short: 10 objects.
//
//	go test -run '^$' -bench Audit -benchtime 3x -count 3 ./handlers/audit/
func BenchmarkAudit(b *testing.B) {
	objects := 200
	if testing.Short() {
		objects = 10
	}
	ab := newBench(b, "", b.TempDir(), b.TempDir())
	var versions int
	for i := range objects {
		ark := fmt.Sprintf("ark:/99999/fk4bench%04d", i)
		obj := object{"small.txt": content(i, 0, 4<<10), "data/mid.bin": content(i, 1, 256<<10)}
		if i%2 == 0 {
			obj["data/big.bin"] = content(i, 2, 1<<20)
		}
		ab.deposit(ark, 1, obj)
		versions++
		if i%5 == 0 {
			obj["small.txt"] = content(i, 3, 4<<10)
			ab.deposit(ark, 2, obj)
			versions++
		}
	}
	stored := readHash(b, ab.targets) // and warms the cache
	reportObjects := func(b *testing.B) {
		b.ReportMetric(float64(objects*b.N)/b.Elapsed().Seconds(), "objects/s")
	}

	b.Run("baseline-read-hash", func(b *testing.B) {
		b.SetBytes(stored)
		for range b.N {
			readHash(b, ab.targets)
		}
		reportObjects(b)
	})
	b.Run("audit", func(b *testing.B) {
		for range b.N {
			auditAll(b, ab, audit.Options{}, objects, versions, 0)
		}
		reportObjects(b)
	})
	for _, opt := range []struct {
		name string
		opt  audit.Options
	}{
		{"audit-fixity", audit.Options{Fixity: true}},
		{"audit-fixity-record", audit.Options{Fixity: true, Record: true}},
	} {
		b.Run(opt.name, func(b *testing.B) {
			ab.a.Agent = "ingestq bench"
			b.SetBytes(stored)
			var baseline time.Duration
			for range b.N {
				auditAll(b, ab, opt.opt, objects, versions, stored)
				b.StopTimer()
				start := time.Now()
				readHash(b, ab.targets)
				baseline += time.Since(start)
				b.StartTimer()
			}
			reportObjects(b)
			b.ReportMetric(float64(baseline.Microseconds())/1000/float64(b.N), "baseline-ms/op")
			b.ReportMetric(100*baseline.Seconds()/b.Elapsed().Seconds(), "pct-of-baseline")
		})
	}
}

// content is n bytes of file f of object i, unlike any other's.
func content(i, f, n int) string {
	data := make([]byte, n)
	for k := range data {
		data[k] = byte(i*131 + f*17 + k*7 + k>>9)
	}
	return string(data)
}

// auditAll audits every object with opt and fails b unless it found
// nothing in objects objects of versions versions, and read stored bytes
// back.
func auditAll(b *testing.B, ab *bench, opt audit.Options, objects, versions int, stored int64) {
	b.Helper()
	found, sum := ab.run(opt)
	events := 0
	if opt.Record {
		events = 2 * versions
	}
	if len(found) > 0 || sum.Objects != objects || sum.Versions != versions || sum.BytesRead != stored || sum.EventsRecorded != events {
		b.Fatalf("audit %+v: %d findings %+v, counts %+v; want no findings, %d objects, %d versions, %d bytes read back, %d events",
			opt, len(found), found, sum.Counts, objects, versions, stored, events)
	}
}

// readHash is the baseline: every content file under roots (each in a
// "content" folder of an OCFL version) read and hashed with SHA-256,
// audit.Defaults.Parallel at once. It returns the bytes read.
func readHash(b *testing.B, roots []string) int64 {
	b.Helper()
	var files []string
	for _, root := range roots {
		files = contentFiles(b, root, false, files)
	}
	var (
		mu    sync.Mutex
		total int64
		first error
		wg    sync.WaitGroup
	)
	next := make(chan string)
	for range audit.Defaults.Parallel {
		wg.Go(func() {
			buf := make([]byte, 256<<10) // the audit's copy buffer
			for path := range next {
				n, err := hashFile(path, buf)
				mu.Lock()
				total += n
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	for _, path := range files {
		next <- path
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return total
}

// contentFiles appends to files each file under dir that is in a folder
// named content (inContent: dir is under one).
func contentFiles(b *testing.B, dir string, inContent bool, files []string) []string {
	b.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			files = contentFiles(b, path, inContent || e.Name() == "content", files)
		case inContent:
			files = append(files, path)
		}
	}
	return files
}

// hashFile reads path through buf into SHA-256 and returns the bytes read.
func hashFile(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := sha256.New()
	// Wrapped so that io.CopyBuffer uses buf: *os.File's WriteTo would
	// copy through io.Copy's 32 KiB buffer.
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf)
	h.Sum(nil)
	return n, err
}
