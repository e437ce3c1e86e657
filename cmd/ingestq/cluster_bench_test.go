//go:build linux

package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkCluster is the throughput of one host against three hosts on
// this one machine, each an `ingestq serve` process on one ZooKeeper
// ensemble, one S3 server and one PostgreSQL: batches of pass-through jobs
// (the queue's own cost), and single-file batches through the real ingest
// pipeline. Run without the race detector:
//
//	INGESTQ_TEST_NORACE=1 go test -run '^$' -bench Cluster -benchtime 3x ./cmd/ingestq/
func BenchmarkCluster(b *testing.B) {
	for _, ingest := range []bool{false, true} {
		for _, hosts := range []int{1, 3} {
			name := fmt.Sprintf("passthrough/hosts=%d", hosts)
			if ingest {
				name = fmt.Sprintf("ingest/hosts=%d", hosts)
			}
			b.Run(name, func(b *testing.B) { benchCluster(b, ingest, hosts) })
		}
	}
}

func benchCluster(b *testing.B, ingest bool, hosts int) {
	c := newCluster(b, false)
	for i := range hosts {
		c.startWith(fmt.Sprintf("h%d", i+1), ingest)
	}
	const passthroughJobs, ingestObjects = 400, 60
	objects := 0
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		var bid string
		if ingest {
			bid = c.submit(c.singleFileBatch(fmt.Sprintf("b%d", i), ingestObjects), "manifest", nil)
			objects += ingestObjects
		} else {
			bid = c.submit(fmt.Sprintf("passthrough:%d", passthroughJobs), "auto", nil)
			objects += passthroughJobs
		}
		waitBatchDone(b, c.q, bid, 10*time.Minute)
	}
	b.ReportMetric(float64(objects)/time.Since(start).Seconds(), "objects/s")
}

// singleFileBatch puts n small files on the web server and lists them in a
// single-file batch manifest.
func (c *cluster) singleFileBatch(tag string, n int) string {
	var m strings.Builder
	m.WriteString(batchHeader("mrt-single-file-batch-manifest"))
	for i := range n {
		data := fmt.Appendf(nil, "object %d of batch %s\n", i, tag)
		url := c.web.put(fmt.Sprintf("/%s/%d.txt", tag, i), data)
		fmt.Fprintf(&m, "%s | md5 | %s | %d | | file.txt | | %s-%d | | |\n", url, md5hex(data), len(data), tag, i)
	}
	m.WriteString("#%eof\n")
	return c.web.put("/"+tag+"/batch.checkm", []byte(m.String()))
}
