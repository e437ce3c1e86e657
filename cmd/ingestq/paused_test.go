//go:build linux

package main_test

import (
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ingestq/ingestq/internal/s3test"
)

// A host of a three-host ingest cluster (real processes, the real
// pipeline, a ZooKeeper ensemble, shared S3 and PostgreSQL) SIGSTOPped in
// the middle of storing an object, past its session timeout: another host
// takes the job over and stores the object. Woken, the paused host's write in flight fails; it neither
// commits nor removes anything of the version the other stored, nor frees
// the other's lock. The object is the other host's version 1, whole.
func TestStorerPausedPastItsSession(t *testing.T) {
	c := newCluster(t, false)
	gate := s3test.StartGate(t, c.s3.Addr, "/v1/content/producer/a.txt")
	c.storage = c.s3.URL(gate.Addr, "ocfl") + "&region=us-east-1"
	for _, h := range []string{"h1", "h2", "h3"} {
		c.start(h)
	}
	o := object{"a.txt": []byte("paused storer, file a\n"), "b.txt": []byte("paused storer, file b\n")}
	bid := c.submit(c.web.put("/p/p.checkm", c.objectManifest("p", "p-1", o)), "manifest", map[string]any{"local_id": "p-1"})

	select {
	case <-gate.Held:
	case <-time.After(3 * time.Minute):
		t.Fatal("no host stored the object in 3 min")
	}
	storer := c.storageLockHolder(time.Minute)
	paused := c.hosts[storer]
	paused.signal(syscall.SIGSTOP)
	t.Logf("SIGSTOP %s with a content file's PUT in flight", storer)
	waitBatchDone(t, c.q, bid, 3*time.Minute)

	// The PUT the paused host sent fails as it wakes; it must not clean up
	// the version the other host committed.
	gate.FailHeld()
	gate.Release()
	paused.signal(syscall.SIGCONT)
	// It tells that its storage lock has gone, and its step ends after that,
	// whatever the step did: the step abandoned (its retry's note found the
	// job changed) or its result abandoned (the final commit did).
	paused.waitLogAfter(time.Minute, "is no longer this daemon's", "abandoned")

	c.assertIngested([]string{bid}, map[string]object{"p-1": o})
	keys := c.storedKeys()
	for _, want := range []string{"0=ocfl_object_1.1", "inventory.json", "v1/inventory.json",
		"v1/content/producer/a.txt", "v1/content/producer/b.txt"} {
		if keys[want] == "" {
			t.Errorf("the stored object lacks %s after the paused host woke (has %v)", want, keys)
		}
	}
	if keys["inventory.json"] != keys["v1/inventory.json"] {
		t.Error("the root inventory and version 1's differ: the paused host wrote one of them")
	}
	if n, _ := c.lockCount("/locks/storage"); n != 0 {
		t.Errorf("%d storage locks left", n)
	}
	assertCheckClean(t, c.q)
}

// storedKeys reads every key of the one object stored under the test's
// S3 prefix, by its path in the object's root.
func (c *cluster) storedKeys() map[string]string {
	cl, err := c.s3.Client()
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for info := range cl.ListObjects(c.t.Context(), c.s3.Bucket, minio.ListObjectsOptions{Prefix: "ocfl/", Recursive: true}) {
		if info.Err != nil {
			c.t.Fatal(info.Err)
		}
		obj, err := cl.GetObject(c.t.Context(), c.s3.Bucket, info.Key, minio.GetObjectOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		data, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			c.t.Fatal(err)
		}
		// ocfl/<storage root files> and ocfl/<object root>/<path>: the
		// object's paths start at its declaration's folder.
		out[info.Key] = string(data)
	}
	root := ""
	for k := range out {
		if strings.HasSuffix(k, "/0=ocfl_object_1.1") {
			root = strings.TrimSuffix(k, "0=ocfl_object_1.1")
		}
	}
	rel := map[string]string{}
	for k, v := range out {
		if root != "" && strings.HasPrefix(k, root) {
			rel[strings.TrimPrefix(k, root)] = v
		}
	}
	return rel
}

// lockCount counts the nodes under a /locks folder.
func (c *cluster) lockCount(dir string) (int, error) {
	kids, _, err := connOf(c.q).Children(c.root + dir)
	return len(kids), err
}
