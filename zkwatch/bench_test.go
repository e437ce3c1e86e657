package zkwatch

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// BenchmarkCreateToEmit measures, for each child created by another
// connection, the latency from just before the Create call to
//
//   - raw: a bare go-zookeeper ChildrenW watch (a third connection) firing;
//   - watcher: the Watcher's emit reporting the child in Added,
//
// both for the same create. The watcher's latency includes its coalescing
// wait (default 2 ms; "coalesce=off" runs without it) and a re-listing.
func BenchmarkCreateToEmit(b *testing.B) {
	for _, bc := range []struct {
		name     string
		coalesce time.Duration
	}{{"coalesce=2ms", 0}, {"coalesce=off", -1}} {
		b.Run(bc.name, func(b *testing.B) { benchCreateToEmit(b, bc.coalesce) })
	}
}

type seenChild struct {
	name  string
	added bool
	at    time.Time
}

func benchCreateToEmit(b *testing.B, coalesce time.Duration) {
	writer, raw := zktest.Connect(b), zktest.Connect(b)
	root := zktest.Root(b)
	dir := root + "/pending"
	mkdirs(b, writer, root, dir)

	seen := make(chan seenChild, 1024)
	first := make(chan struct{})
	w := NewWatcher(dial(b, Config{}), WatcherConfig{Coalesce: coalesce, Rescan: -1}, func(c Change) {
		now := time.Now()
		if c.Rescan {
			close(first)
			return
		}
		for _, a := range c.Added {
			seen <- seenChild{a, true, now}
		}
		for _, r := range c.Removed {
			seen <- seenChild{r, false, now}
		}
	})
	b.Cleanup(w.Close)
	w.Watch(dir)
	<-first
	next := func(name string, added bool) time.Time {
		timeout := time.After(waitTimeout)
		for {
			select {
			case s := <-seen:
				if s.name == name && s.added == added {
					return s.at
				}
			case <-timeout:
				b.Fatalf("watcher did not report %s (added %v)", name, added)
			}
		}
	}

	var rawLat, wLat []time.Duration
	listings := w.Stats().Listings
	i := 0
	for b.Loop() {
		_, _, rawCh, err := raw.ChildrenW(dir)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("c-%06d", i)
		i++
		t0 := time.Now()
		if _, err := writer.Create(dir+"/"+name, nil, 0, acl); err != nil {
			b.Fatal(err)
		}
		ev := <-rawCh
		t1 := time.Now()
		if ev.Type != zk.EventNodeChildrenChanged {
			b.Fatalf("raw watch: %v", ev)
		}
		t2 := next(name, true)
		rawLat = append(rawLat, t1.Sub(t0))
		wLat = append(wLat, t2.Sub(t0))
		// Delete it and wait until the watcher has seen that, so that the
		// next create starts from a quiet watcher.
		if err := writer.Delete(dir+"/"+name, -1); err != nil {
			b.Fatal(err)
		}
		next(name, false)
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(percentile(rawLat, 50)), "raw-p50-µs")
	b.ReportMetric(us(percentile(rawLat, 99)), "raw-p99-µs")
	b.ReportMetric(us(percentile(wLat, 50)), "watcher-p50-µs")
	b.ReportMetric(us(percentile(wLat, 99)), "watcher-p99-µs")
	b.ReportMetric(float64(w.Stats().Listings-listings)/float64(len(wLat)), "listings/op")
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
