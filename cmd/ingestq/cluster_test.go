//go:build linux

package main_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/storage/ocfl"
	"github.com/ingestq/ingestq/handlers/storage/place"
	"github.com/ingestq/ingestq/internal/pgtest"
	"github.com/ingestq/ingestq/internal/s3test"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The ingest cluster, as operators run it: three `ingestq serve` processes
// as three hosts (each its own data folder), on a three-server ZooKeeper
// ensemble, storing into one S3 server and recording into one PostgreSQL.
// Batches of every payload type, 41 objects in all, complete while one host
// is SIGKILLed in the middle of a download and another in the middle of
// storing; each object is stored once (one OCFL version, digests as
// deposited) and recorded once, under its own ARK; an update by local id
// run by a host other than the one that first stored the object makes v2
// of the same ARK; `ingestq check` is clean.
func TestClusterOfThreeHosts(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "own working folders"
		if shared {
			name = "shared working area"
		}
		t.Run(name, func(t *testing.T) { runCluster(t, shared) })
	}
}

// cluster is the shared services and the hosts of one run.
type cluster struct {
	t       testing.TB
	ens     *zktest.Ensemble
	zk      string // the ensemble's connect string
	root    string
	nats    string
	s3      *s3test.Server
	storage string // the S3 storage target
	pg      string // the inventory
	inv     inventory.Inventory
	work    string // the shared working area, or ""
	web     *files
	q       *queue.Queue
	hosts   map[string]*daemon
}

func newCluster(t testing.TB, shared bool) *cluster {
	ens, err := zktest.StartEnsemble(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ens.Stop() })
	c := &cluster{t: t, ens: ens, zk: strings.Join(ens.Addrs(), ","), root: zktest.Root(t), web: newFiles(t), hosts: map[string]*daemon{}}
	c.s3 = s3test.Start(t)
	c.s3.SetEnv(t) // the daemons inherit the AWS_* variables
	c.storage = c.s3.URL(c.s3.Addr, "ocfl") + "&region=us-east-1"
	c.pg = pgtest.NewDatabase(t, pgtest.Start(t))
	c.nats = startNATS(t, -1, t.TempDir()).ClientURL()
	if shared {
		c.work = t.TempDir()
	}
	conn := zktest.Connect(t, ens.Addrs()...)
	if c.q, err = queue.New(conn, c.root); err != nil {
		t.Fatal(err)
	}
	testConns.Store(c.q, conn)
	t.Cleanup(func() { testConns.Delete(c.q) })
	if err := c.q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs host name (again, after a kill: a fresh data folder) with
// the ingest pipeline.
func (c *cluster) start(name string) *daemon { return c.startWith(name, true) }

// startWith runs host name with the ingest pipeline, or the pass-through one.
func (c *cluster) startWith(name string, ingest bool) *daemon {
	extra := []string{"--storage", c.storage, "--inventory", c.pg, "--zk-session-timeout", "4s",
		"--fetch-timeout", "5m", "--state-workers", "downloading=2,storing=2"}
	if c.work != "" {
		extra = append(extra, "--work-dir", c.work, "--work-shared")
	}
	d := startDaemon(c.t, daemonConfig{Host: name, ZK: c.zk, Root: c.root, NATS: c.nats, Ingest: ingest, Extra: extra})
	c.hosts[name] = d
	return d
}

// hostOf names the live host whose session owns an ephemeral node's stat.
func (c *cluster) hostOf(st *zk.Stat) string {
	hosts, err := c.q.Hosts(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	conn := connOf(c.q)
	for _, h := range hosts {
		_, hst, err := conn.Get(c.root + "/ingestq/hosts/" + h.Name)
		if err == nil && hst.EphemeralOwner == st.EphemeralOwner {
			return h.Name
		}
	}
	return ""
}

// object is one deposited object: its files by name.
type object map[string][]byte

// deposits puts every payload type on the web server: a manifest of 14
// object manifests (one of which has a file that stalls), a single-file
// batch of 16, a container batch of 8, and one each of a single file, a
// zip and an object manifest submitted alone. It returns the payload URLs
// to submit, with their type, and every object by local id.
func (c *cluster) deposits(tag string) (payloads [][2]string, objs map[string]object, stalled string) {
	objs = map[string]object{}
	add := func(id string, o object) { objs[id] = o }
	var batch strings.Builder
	batch.WriteString(batchHeader("mrt-batch-manifest"))
	for i := range 14 {
		id := fmt.Sprintf("%s-m%02d", tag, i)
		o := object{"a.txt": fmt.Appendf(nil, "object %s, file a\n", id), "sub/b.bin": bytes.Repeat([]byte{byte(i)}, 40_000+i)}
		if i == 5 {
			o["slow.bin"] = bytes.Repeat([]byte("slow"), 300_000)
			stalled = "/" + tag + "/" + id + "/slow.bin"
		}
		add(id, o)
		murl := c.web.put(fmt.Sprintf("/%s/%s.checkm", tag, id), c.objectManifest(tag, id, o))
		fmt.Fprintf(&batch, "%s | | | | | %s.checkm | | %s | Cluster test | Object %d | 2026\n", murl, id, id, i)
	}
	batch.WriteString("#%eof\n")
	payloads = append(payloads, [2]string{c.web.put("/"+tag+"/batch.checkm", []byte(batch.String())), "manifest"})

	payloads = append(payloads, [2]string{c.singles(tag, 16, add), "manifest"})

	var zips strings.Builder
	zips.WriteString(batchHeader("mrt-container-batch-manifest"))
	for i := range 8 {
		id := fmt.Sprintf("%s-z%02d", tag, i)
		o := object{"one.txt": fmt.Appendf(nil, "zip %s one\n", id), "dir/two.txt": fmt.Appendf(nil, "zip %s two\n", id)}
		add(id, o)
		z := zipOf(c.t, o)
		fmt.Fprintf(&zips, "%s | md5 | %s | %d | | %s.zip | | %s | | |\n", c.web.put("/"+tag+"/"+id+".zip", z), md5hex(z), len(z), id, id)
	}
	zips.WriteString("#%eof\n")
	payloads = append(payloads, [2]string{c.web.put("/"+tag+"/zips.checkm", []byte(zips.String())), "manifest"})

	file := object{"alone.txt": []byte("a file submitted alone\n")}
	add(tag+"-file", file)
	payloads = append(payloads, [2]string{c.web.put("/"+tag+"/alone.txt", file["alone.txt"]), "file"})
	zipped := object{"in-zip.txt": []byte("a zip submitted alone\n")}
	add(tag+"-zip", zipped)
	payloads = append(payloads, [2]string{c.web.put("/"+tag+"/alone.zip", zipOf(c.t, zipped)), "container"})
	manifested := object{"m.txt": []byte("an object manifest submitted alone\n")}
	add(tag+"-manifest", manifested)
	payloads = append(payloads, [2]string{c.web.put("/"+tag+"/alone.checkm", c.objectManifest(tag, tag+"-manifest", manifested)), "manifest"})
	return payloads, objs, stalled
}

// singles puts a single-file batch of n objects, <tag>-s00 on, on the web
// server, hands each object to add, and returns the batch's URL.
func (c *cluster) singles(tag string, n int, add func(id string, o object)) string {
	var singles strings.Builder
	singles.WriteString(batchHeader("mrt-single-file-batch-manifest"))
	for i := range n {
		id := fmt.Sprintf("%s-s%02d", tag, i)
		data := fmt.Appendf(nil, "single file %s\n%s", id, bytes.Repeat([]byte("x"), i*1000))
		add(id, object{"single.txt": data})
		fmt.Fprintf(&singles, "%s | md5 | %s | %d | | single.txt | | %s | | |\n", c.web.put("/"+tag+"/"+id+"/single.txt", data), md5hex(data), len(data), id)
	}
	singles.WriteString("#%eof\n")
	return c.web.put("/"+tag+"/singles.checkm", []byte(singles.String()))
}

func batchHeader(profile string) string {
	return "#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/" + profile + "\n" +
		"#%prefix | mrt: | http://merritt.cdlib.org/terms#\n#%prefix | nfo: | http://www.semanticdesktop.org/ontologies/2007/03/22/nfo#\n" +
		"#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName | " +
		"mrt:primaryIdentifier | mrt:localIdentifier | mrt:creator | mrt:title | mrt:date\n"
}

// objectManifest puts o's files on the web server and lists them.
func (c *cluster) objectManifest(tag, id string, o object) []byte {
	rows := map[string][2]any{}
	for name, data := range o {
		rows[name] = [2]any{c.web.put("/"+tag+"/"+id+"/"+name, data), data}
	}
	return objectManifest(rows)
}

func zipOf(t testing.TB, o object) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, data := range o {
		f, err := w.Create(name)
		if err == nil {
			_, err = f.Write(data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (c *cluster) submit(url, typ string, fields map[string]any) string {
	sub := map[string]any{"profile_name": "demo", "submitter": "cluster test", "payload_url": url, "type": typ}
	for k, v := range fields {
		sub[k] = v
	}
	b, err := c.q.CreateBatch(c.t.Context(), queue.SubmissionOf(sub))
	if err != nil {
		c.t.Fatal(err)
	}
	return b.ID
}

func runCluster(t testing.TB, shared bool) {
	c := newCluster(t, shared)
	for _, h := range []string{"h1", "h2", "h3"} {
		c.start(h)
	}
	payloads, objs, stall := c.deposits("c")
	c.web.stall = stall
	var bids []string
	for _, p := range payloads {
		fields := map[string]any{}
		switch {
		case strings.HasSuffix(p[0], "alone.txt"):
			fields = map[string]any{"file_name": "alone.txt", "local_id": "c-file"}
		case strings.HasSuffix(p[0], "alone.zip"):
			fields = map[string]any{"local_id": "c-zip"}
		case strings.HasSuffix(p[0], "alone.checkm"):
			fields = map[string]any{"local_id": "c-manifest"}
		}
		bids = append(bids, c.submit(p[0], p[1], fields))
	}

	// SIGKILL the host downloading the object whose file stalls.
	select {
	case <-c.web.stalled:
	case <-time.After(5 * time.Minute): // only a bug waits this long; a loaded machine took over 2 min
		t.Fatalf("the stalling file was never requested")
	}
	downloader := c.lockHolder(queue.Downloading, func(j *queue.Job) bool { return strings.HasSuffix(j.Config.PayloadURL, "c-m05.checkm") })
	t.Logf("SIGKILL %s while it downloads c-m05", downloader)
	c.hosts[downloader].kill()
	c.web.unstall()

	// SIGKILL a host holding an object's storage lock: it is storing.
	storer := c.storageLockHolder(2 * time.Minute)
	t.Logf("SIGKILL %s while it stores", storer)
	c.hosts[storer].kill()

	// Both come back, as a restarted host would, with fresh data folders.
	c.start(downloader + "b")
	if storer != downloader {
		c.start(storer + "b")
	}
	for _, bid := range bids {
		waitBatchDone(t, c.q, bid, 4*time.Minute)
	}

	arks := c.assertIngested(bids, objs)
	t.Logf("transitions made per host: %v", c.assertTimelines(bids))

	// An update of c-s03 by local id, while the host that stored it is
	// stopped: another host makes v2 of the same ARK.
	first := c.storedBy("c-s03", bids[1])
	upd := object{"single.txt": []byte("single file c-s03, revised\n")}
	url := c.web.put("/c/update/single.txt", upd["single.txt"])
	if d := c.hosts[first]; d != nil && !d.exited() {
		d.signal(syscall.SIGTERM)
		d.wait(30 * time.Second)
	}
	bid := c.submit(url, "file", map[string]any{"file_name": "single.txt", "local_id": "c-s03"})
	waitBatchDone(t, c.q, bid, 2*time.Minute)
	got := c.assertIngested([]string{bid}, map[string]object{"c-s03": upd})
	if got["c-s03"] != arks["c-s03"] {
		t.Errorf("the update of c-s03 stored %s, want its ARK %s", got["c-s03"], arks["c-s03"])
	}
	c.assertVersions(arks["c-s03"], 2, upd)
	c.assertTimelines([]string{bid})
	assertCheckClean(t, c.q)
}

// lockHolder waits for the job in state s that match picks, locked, and
// names the host holding its lock.
func (c *cluster) lockHolder(s queue.State, match func(*queue.Job) bool) string {
	var host string
	poll(c.t, time.Minute, "the host holding the "+string(s)+" job", func() (bool, string, error) {
		jobs, _, err := c.q.ListJobs(c.t.Context(), s)
		if err != nil {
			return false, "", err
		}
		for _, j := range jobs {
			if !match(j) {
				continue
			}
			_, st, err := connOf(c.q).Get(c.root + "/jobs/" + j.ID + "/lock")
			if err != nil {
				return false, "not locked", nil
			}
			host = c.hostOf(st)
			return host != "", "lock of an unknown session", nil
		}
		return false, "no such job", nil
	})
	return host
}

// storageLockHolder watches /locks/storage for an object's lock and names
// the host whose session holds it.
func (c *cluster) storageLockHolder(timeout time.Duration) string {
	conn := connOf(c.q)
	dir := c.root + "/locks/storage"
	deadline := time.After(timeout)
	for {
		kids, _, ch, err := conn.ChildrenW(dir)
		if err != nil {
			c.t.Fatalf("watch %s: %v", dir, err)
		}
		for _, k := range kids {
			if _, st, err := conn.Get(dir + "/" + k); err == nil {
				// A host killed already keeps its node until its session expires.
				if h := c.hostOf(st); h != "" && !c.hosts[h].exited() {
					return h
				}
			}
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("no storage lock seen in %v", timeout)
		}
	}
}

// assertIngested checks every job of the batches: Completed, one ARK per
// local id and no ARK twice, stored once on S3 with the deposited files'
// digests, recorded in PostgreSQL. It returns the ARKs by local id.
func (c *cluster) assertIngested(bids []string, objs map[string]object) map[string]string {
	t := c.t
	arks := map[string]string{}
	for _, bid := range bids {
		b, err := c.q.LoadBatch(t.Context(), bid)
		if err != nil || b.State() != queue.Completed {
			t.Fatalf("batch %s: %v (%v): %s", bid, b.State(), err, describeBatch(c.q, bid))
		}
		buckets, err := c.q.BatchJobs(t.Context(), bid)
		if err != nil {
			t.Fatal(err)
		}
		for _, jid := range buckets["batch-completed"] {
			j, err := c.q.LoadJob(t.Context(), jid)
			if err != nil || j.Identifiers == nil || len(j.Identifiers.LocalIDs) != 1 {
				t.Fatalf("job %s: %+v (%v)", jid, j, err)
			}
			lid := j.Identifiers.LocalIDs[0]
			if _, dup := arks[lid]; dup {
				t.Errorf("local id %s has two jobs", lid)
			}
			arks[lid] = j.Identifiers.PrimaryID
		}
	}
	seen := map[string]string{}
	for lid, ark := range arks {
		if other, dup := seen[ark]; dup {
			t.Errorf("%s and %s share the ARK %s", lid, other, ark)
		}
		seen[ark] = lid
	}
	if len(arks) != len(objs) {
		t.Errorf("%d objects completed, want %d", len(arks), len(objs))
	}
	for lid, o := range objs {
		if ark, ok := arks[lid]; ok {
			c.assertStored(ark, o)
		} else {
			t.Errorf("no completed job for %s", lid)
		}
	}
	return arks
}

// assertStored checks ark's latest version on S3 and in the inventory: the
// deposit's files with their digests, one version recorded per version
// stored.
func (c *cluster) assertStored(ark string, o object) {
	t := c.t
	st := c.store()
	v, err := st.Latest(t.Context(), ark)
	if err != nil {
		t.Errorf("%s: not in storage: %v", ark, err)
		return
	}
	have := map[string]string{}
	for _, f := range v.Files {
		have[f.Name] = f.SHA256
	}
	for name, data := range o {
		if got := have[path.Join("producer", name)]; got != sha256hex(data) {
			t.Errorf("%s v%d: producer/%s sha256 %q, want %s", ark, v.Number, name, got, sha256hex(data))
		}
	}
	inv := c.inventory()
	d, err := inv.Object(t.Context(), ark)
	if err != nil {
		t.Errorf("%s: not in the inventory: %v", ark, err)
		return
	}
	if len(d.Versions) != v.Number || d.Versions[len(d.Versions)-1].Version != v.Number {
		t.Errorf("%s: %d versions recorded, want %d (the stored ones)", ark, len(d.Versions), v.Number)
	}
}

// assertVersions checks that ark has n versions, the last holding o.
func (c *cluster) assertVersions(ark string, n int, o object) {
	v, err := c.store().Latest(c.t.Context(), ark)
	if err != nil || v.Number != n {
		c.t.Errorf("%s: latest version %d (%v), want %d", ark, v.Number, err, n)
	}
	c.assertStored(ark, o)
}

func (c *cluster) store() *ocfl.Store {
	pl, err := place.Open(c.t.Context(), c.storage)
	if err != nil {
		c.t.Fatal(err)
	}
	st, err := ocfl.New(c.t.Context(), pl)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// inventory is the test's one handle on the inventory: one per object
// checked would use up PostgreSQL's connections.
func (c *cluster) inventory() inventory.Inventory {
	if c.inv != nil {
		return c.inv
	}
	h, err := inventory.Open(c.t.Context(), c.pg, "", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = h.Close() })
	c.inv = h
	return h
}

// jobTimeline is a job's states from Pending to Completed.
var jobTimeline = []queue.State{queue.Estimating, queue.Provisioning, queue.Downloading, queue.Processing,
	queue.Storing, queue.Recording, queue.Notify, queue.Completed}

// assertTimelines checks that the recorded events hold each job's every
// transition, whichever host made it, and returns how many transitions
// each host made. A move whose maker was SIGKILLed before publishing it is
// published by the host that moves the job next or reports its batch
// (decision 131), and a batch's end by a reporter's rescan, 15 s after the
// move at the earliest (decision 222). The record is polled a while: the
// batch is done in ZooKeeper a moment before its last events are stored.
func (c *cluster) assertTimelines(bids []string) map[string]int {
	deadline := time.Now().Add(45 * time.Second)
	for {
		ran, recovered, missing := c.timelines(bids)
		if len(missing) == 0 {
			c.t.Logf("%d transitions recovered by another host", recovered)
			return ran
		}
		if time.Now().After(deadline) {
			for _, m := range missing {
				c.t.Error(m)
			}
			return ran
		}
		time.Sleep(time.Second) // between polls of the record: no event says a recovery is done
	}
}

// timelines reads the batches' events: transitions per host, how many were
// recovered, and each job's move that has no event.
func (c *cluster) timelines(bids []string) (ran map[string]int, recovered int, missing []string) {
	ran = map[string]int{}
	for _, bid := range bids {
		evs := replay(c.t, c.nats, bid)
		buckets, err := c.q.BatchJobs(c.t.Context(), bid)
		if err != nil {
			c.t.Fatal(err)
		}
		// The batch's own moves too: a reporter killed after its last
		// commit has that end published by a reporter's rescan, 15 s on
		// (decision 222).
		batchAt := map[string]bool{}
		for _, e := range evs {
			if e.Kind == events.KindBatch && e.BatchID == bid {
				batchAt[e.To] = true
			}
		}
		if !batchAt[string(queue.Processing)] || !batchAt[string(queue.Reporting)] || !batchAt[string(queue.Completed)] && !batchAt[string(queue.Failed)] {
			missing = append(missing, fmt.Sprintf("batch %s: its moves to Processing, Reporting and its end are not all in the replay (got %v)", bid, batchAt))
		}
		for _, jid := range buckets["batch-completed"] {
			at := map[queue.State]bool{}
			for _, e := range evs {
				if e.Kind != events.KindJob || e.JobID != jid || e.To == "" {
					continue
				}
				at[queue.State(e.To)] = true
				if e.RecoveredBy != "" {
					recovered++
				} else {
					ran[e.Host]++
				}
			}
			for _, s := range jobTimeline {
				if !at[s] {
					missing = append(missing, fmt.Sprintf("job %s of %s: no event of its move to %s in the replay (got %v)", jid, bid, s, at))
				}
			}
		}
	}
	return ran, recovered, missing
}

// storedBy names the host that moved the object of local id lid of batch
// bid out of Storing, from the events: "" when that move's event was
// recovered by another host (its maker was SIGKILLed after the commit,
// before publishing; recovered events name no maker), a host gone anyway.
func (c *cluster) storedBy(lid, bid string) string {
	buckets, _ := c.q.BatchJobs(c.t.Context(), bid)
	for _, jid := range buckets["batch-completed"] {
		j, err := c.q.LoadJob(c.t.Context(), jid)
		if err != nil || j.Identifiers == nil || !slices.Contains(j.Identifiers.LocalIDs, lid) {
			continue
		}
		for _, e := range replay(c.t, c.nats, bid) {
			switch {
			case e.JobID != jid:
			case e.From == string(queue.Storing):
				return e.Host
			case e.To == string(queue.Recording) && e.RecoveredBy != "":
				c.t.Logf("%s's move out of Storing was recovered by %s: the host that stored it was killed", lid, e.RecoveredBy)
				return ""
			}
		}
	}
	c.t.Fatalf("no Storing event of %s in batch %s", lid, bid)
	return ""
}
