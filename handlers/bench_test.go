package handlers_test

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/internal/durable"
	"github.com/ingestq/ingestq/reactor/queue"
)

// benchPerJob is the pipeline's default PerJob, also the baseline's
// parallelism, so that both move the bytes as many at a time.
const benchPerJob = 4

// BenchmarkIngestObject runs object manifests through the whole pipeline
// (Estimating to Notify, with ZooKeeper, the built-in storage and
// inventory): one op submits one manifest and waits for its batch to
// Complete. Each op is followed by the baseline, untimed: the floor of any
// durable copy of the same files from the same server (http.Get + io.Copy
// into a fresh folder, fsync per file and of the folders once, benchPerJob
// at a time). Interleaving the two keeps a drifting load on the machine
// from favouring either; pct-of-baseline is the pipeline's throughput as a
// percentage of the baseline's. A second baseline, the verifying copy,
// also hashes every byte as any ingest into OCFL must: by the manifest's
// algorithm, and by SHA-256 when that is another (pct-of-verifying).
// floor-pct-of-baseline is the verifying copy's own share of the durable
// copy's throughput: the most any ingest into OCFL can reach on this host,
// whatever it does besides. cpu-ms/op and verifying-cpu-ms/op are this
// process's CPU time in each (the pipeline's and the test server's, not
// ZooKeeper's): what the pipeline costs beyond the bytes' own work.
//
//	go test -run '^$' -bench IngestObject -benchtime 5x -count 3 ./handlers/
func BenchmarkIngestObject(b *testing.B) {
	for _, set := range []struct {
		name        string
		files, size int
		sha256      bool // the manifest gives SHA-256 digests: one hash per byte, not md5 and SHA-256
	}{
		// The many small files last: on a file system mounted with
		// discard (these hosts' root), freeing their thousands of small
		// extents at a case's cleanup slowed the fsyncs of the case after
		// it for tens of seconds (Storing of the 8 MiB object: 7 ms alone,
		// 21-23 ms right after it).
		{"files=10,size=8MiB", 10, 8 << 20, false},
		{"files=10,size=8MiB,digest=sha256", 10, 8 << 20, true},
		{"files=1000,size=4KiB", 1000, 4 << 10, false},
	} {
		b.Run(set.name, func(b *testing.B) {
			r := newRig(b, nil)
			rows := make([]row, set.files)
			urls := make([]string, set.files)
			for i := range set.files {
				data := benchData(i, set.size)
				name := benchName(i)
				urls[i] = r.content.put("/f/"+name, data)
				rows[i] = fileRow(urls[i], name, data)
				if set.sha256 {
					sum := sha256.Sum256(data)
					rows[i].alg, rows[i].digest = "sha256", hex.EncodeToString(sum[:])
				}
			}
			url := r.content.put("/object.checkm", manifest("mrt-ingest-manifest", rows...))
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchPerJob, DisableCompression: true}}
			root := b.TempDir()
			b.SetBytes(int64(set.files * set.size))
			b.ResetTimer()
			steps := map[string]time.Duration{}
			var baseline, verifying time.Duration
			algs := []string{"md5", "sha256"}
			if set.sha256 {
				algs = algs[1:]
			}
			reads0, writes0 := r.daemonQ.Requests()
			var cpuIngest, cpuVerifying time.Duration // this process's, both modes
			for i := range b.N {
				cpu := processCPU()
				for state, d := range ingest(r, url) {
					steps[state] += d
				}
				cpuIngest += processCPU() - cpu
				b.StopTimer()
				dir := filepath.Join(root, fmt.Sprint(i))
				start := time.Now()
				if err := durableCopy(client, urls, dir); err != nil {
					b.Fatal(err)
				}
				baseline += time.Since(start)
				os.RemoveAll(dir)
				start, cpu = time.Now(), processCPU()
				if err := durableCopy(client, urls, dir, algs...); err != nil {
					b.Fatal(err)
				}
				verifying += time.Since(start)
				cpuVerifying += processCPU() - cpu
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(set.files*b.N)/b.Elapsed().Seconds(), "files/s")
			b.ReportMetric(float64(cpuIngest.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(cpuVerifying.Microseconds())/1000/float64(b.N), "verifying-cpu-ms/op")
			b.ReportMetric(float64(baseline.Milliseconds())/float64(b.N), "baseline-ms/op")
			b.ReportMetric(100*baseline.Seconds()/b.Elapsed().Seconds(), "pct-of-baseline")
			b.ReportMetric(100*verifying.Seconds()/b.Elapsed().Seconds(), "pct-of-verifying")
			b.ReportMetric(100*baseline.Seconds()/verifying.Seconds(), "floor-pct-of-baseline")
			reads, writes := r.daemonQ.Requests()
			b.ReportMetric(float64(reads-reads0)/float64(b.N), "zk-reads/op")
			b.ReportMetric(float64(writes-writes0)/float64(b.N), "zk-writes/op")
			// Where an op's time goes, from the job's transition events.
			for _, state := range []string{"before-jobs", string(queue.Estimating), string(queue.Provisioning), string(queue.Downloading),
				string(queue.Processing), string(queue.Storing), string(queue.Recording), string(queue.Notify), "after-jobs"} {
				b.ReportMetric(float64(steps[state].Microseconds())/1000/float64(b.N), state+"-ms/op")
			}
		})
	}
}

// processCPU is the CPU time this process (the daemon's code and the test
// server's) has used so far, user and system. ZooKeeper's is its own.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchName spreads files over folders of at most 100, as deposits do.
func benchName(i int) string { return fmt.Sprintf("d%02d/f%05d.bin", i/100, i) }

// benchData is size bytes, distinct per file.
func benchData(i, size int) []byte {
	data := []byte(strings.Repeat(fmt.Sprintf("file %08d ", i), size/14+1))
	return data[:size]
}

// durableCopy is the baseline: each URL copied to dir/<its path below /f/>,
// fsynced, then every folder made fsynced once. Given algs (md5, sha256),
// it is the verifying copy: each byte hashed on the way by each, and the
// disk's writes started every MiB, as the pipeline's downloads do.
func durableCopy(client *http.Client, urls []string, dir string, algs ...string) error {
	dirs := map[string]bool{dir: true}
	for _, u := range urls {
		dest := filepath.Join(dir, filepath.FromSlash(u[strings.Index(u, "/f/")+3:]))
		if !dirs[filepath.Dir(dest)] {
			dirs[filepath.Dir(dest)] = true
			if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
				return err
			}
		}
	}
	jobs := make(chan string)
	errs := make(chan error, len(urls))
	done := make(chan struct{})
	for range benchPerJob {
		go func() {
			defer func() { done <- struct{}{} }()
			for u := range jobs {
				errs <- getFile(client, u, filepath.Join(dir, filepath.FromSlash(u[strings.Index(u, "/f/")+3:])), algs)
			}
		}()
	}
	for _, u := range urls {
		jobs <- u
	}
	close(jobs)
	for range benchPerJob {
		<-done
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	for d := range dirs {
		f, err := os.Open(d)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func getFile(client *http.Client, url, dest string, algs []string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(dest)
	if err != nil {
		return err
	}
	var w io.Writer = f
	if len(algs) > 0 {
		// The verifying copy starts writeback as the pipeline does
		// (decision 221), to stay the most an ingest can reach.
		w = io.MultiWriter(f, durable.NewWriteback(f, 0))
	}
	for _, alg := range algs {
		switch alg {
		case "md5":
			w = io.MultiWriter(w, md5.New())
		case "sha256":
			w = io.MultiWriter(w, sha256.New())
		}
	}
	_, err = io.Copy(w, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ingest submits the manifest at url and waits for its batch to Complete.
// It returns the time the batch's jobs spent in each state, and under
// "before-jobs" and "after-jobs" the batch's own: from the submission to
// its first job's first move, and from its last job's Completed to its
// report's.
func ingest(r *rig, url string) map[string]time.Duration {
	submitted := time.Now()
	b := r.submit(url)
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		r.t.Fatalf("batch %s failed: %v", b.ID, b.Status.Message)
	}
	out := map[string]time.Duration{}
	var first, last time.Time
	for _, j := range r.jobsOf(b.ID) {
		var prev *events.Event // the job's latest transition
		for _, e := range r.jobEvents(j.ID) {
			if e.Kind != events.KindJob {
				continue
			}
			if prev != nil {
				out[prev.To] += e.Time.Sub(prev.Time)
			} else if first.IsZero() || e.Time.Before(first) {
				first = e.Time
			}
			prev = &e
		}
		if prev != nil && prev.Time.After(last) {
			last = prev.Time
		}
	}
	r.mu.Lock()
	reported := r.reached[b.ID].Time
	r.mu.Unlock()
	out["before-jobs"], out["after-jobs"] = first.Sub(submitted), reported.Sub(last)
	return out
}
