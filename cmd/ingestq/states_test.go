package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingestq/ingestq/events"
	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// storeAndRecord is a program beside the daemons, as Merritt's storage and
// inventory services are: on its own ZooKeeper session and with the queue
// API only, it works Storing (the storage manifest and every file it lists
// fetched over HTTP from the URLs in the job, each digest checked, the
// object kept in a folder of its own, an inventory manifest of its own
// written to the job) and Recording (that inventory manifest read back,
// the object recorded).
type storeAndRecord struct {
	t    *testing.T
	q    *queue.Queue
	kept string           // ark-named folders of the objects it stored
	web  *httptest.Server // its inventory manifests

	mu       sync.Mutex
	manifest map[string][]byte // jid → its inventory manifest
	recorded map[string]int    // ark → times recorded
}

// inventoryManifest is the consumer's own inventory manifest, in the shape
// of the daemon's: the ARK, the version, the files.
type inventoryManifest struct {
	ARK    string         `json:"ark"`
	Number int            `json:"number"`
	Files  []manifestFile `json:"files"`
}

type manifestFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func newStoreAndRecord(t *testing.T, zkAddr, root string) *storeAndRecord {
	c := &storeAndRecord{t: t, q: openQueue(t, zkAddr, root), kept: t.TempDir(), manifest: map[string][]byte{}, recorded: map[string]int{}}
	c.web = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		data, ok := c.manifest[strings.TrimPrefix(r.URL.Path, "/inventory/")]
		c.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(c.web.Close)
	return c
}

// fetch GETs url, which must be an HTTP URL: what the daemon hands on
// must be readable from another host.
func fetch(ctx context.Context, url string) ([]byte, error) {
	if !strings.HasPrefix(url, "http://") {
		return nil, fmt.Errorf("%q is not an HTTP URL another host could fetch", url)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return data, err
}

// store fetches the object the job's store node describes and keeps it.
func (c *storeAndRecord) store(ctx context.Context, j *queue.Job) (queue.JobChange, error) {
	if j.Store == nil || j.Identifiers == nil || j.Identifiers.PrimaryID == "" {
		return queue.JobChange{}, fmt.Errorf("no store node or no ARK: %+v %+v", j.Store, j.Identifiers)
	}
	ark := j.Identifiers.PrimaryID
	text, err := fetch(ctx, j.Store.ManifestURL)
	if err != nil {
		return queue.JobChange{}, err
	}
	m, err := checkm.Parse(bytes.NewReader(text), j.Store.ManifestURL, checkm.Limits{})
	if err != nil {
		return queue.JobChange{}, err
	}
	inv := inventoryManifest{ARK: ark, Number: 1}
	for _, e := range m.Entries {
		data, err := fetch(ctx, e.URL)
		if err != nil {
			return queue.JobChange{}, err
		}
		sum := sha256hex(data)
		if e.HashAlg != "sha256" || sum != e.HashValue || int64(len(data)) != e.Size {
			return queue.JobChange{}, fmt.Errorf("%s: %d bytes, sha256 %s; the manifest says %d bytes, %s %s", e.URL, len(data), sum, e.Size, e.HashAlg, e.HashValue)
		}
		keep := filepath.Join(c.kept, strings.NewReplacer(":", "_", "/", "_").Replace(ark), filepath.FromSlash(e.FileName))
		if err := os.MkdirAll(filepath.Dir(keep), 0o750); err != nil {
			return queue.JobChange{}, err
		}
		if err := os.WriteFile(keep, data, 0o600); err != nil {
			return queue.JobChange{}, err
		}
		inv.Files = append(inv.Files, manifestFile{e.FileName, e.Size, e.HashValue})
	}
	data, _ := json.Marshal(inv)
	c.mu.Lock()
	c.manifest[j.ID] = data
	c.mu.Unlock()
	return queue.JobChange{Inventory: &queue.StepManifest{ManifestURL: c.web.URL + "/inventory/" + j.ID, Mode: j.Store.Mode}}, nil
}

// record reads the job's inventory manifest and records the object.
func (c *storeAndRecord) record(ctx context.Context, j *queue.Job) (queue.JobChange, error) {
	if j.Inventory == nil {
		return queue.JobChange{}, fmt.Errorf("no inventory node")
	}
	data, err := fetch(ctx, j.Inventory.ManifestURL)
	if err != nil {
		return queue.JobChange{}, err
	}
	var inv inventoryManifest
	if err := json.Unmarshal(data, &inv); err != nil || inv.ARK != j.Identifiers.PrimaryID || len(inv.Files) == 0 {
		return queue.JobChange{}, fmt.Errorf("inventory manifest %s: %v %+v, want the files of %s", j.Inventory.ManifestURL, err, inv, j.Identifiers.PrimaryID)
	}
	c.mu.Lock()
	c.recorded[inv.ARK]++
	c.mu.Unlock()
	return queue.JobChange{}, nil
}

// work runs state st until ctx ends: a child watch on the state's folder,
// then every job there acquired, worked by do and moved on (or failed, with
// the reason, when do fails: never left half-done).
func (c *storeAndRecord) work(ctx context.Context, st queue.State, do func(context.Context, *queue.Job) (queue.JobChange, error)) {
	next, _ := queue.JobMachine.Success(st)
	for ctx.Err() == nil {
		// The watch first: a job added after it fires it, so none is missed.
		_, _, added, err := connOf(c.q).ChildrenW(c.q.Path("/jobs/states/" + st.Folder()))
		if err != nil {
			c.t.Errorf("consumer of %s: watch: %v", st, err)
			return
		}
		for {
			j, err := c.q.AcquireJob(ctx, st)
			if err != nil || j == nil {
				break
			}
			change, err := do(ctx, j)
			to := next
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				c.t.Errorf("consumer of %s, job %s: %v", st, j.ID, err)
				to, change = queue.Failed, queue.JobChange{Message: fmt.Sprintf("%s: %v", st, err)}
			}
			change.Release = true
			if err := c.q.SetJobStatus(ctx, j, to, change); err != nil && ctx.Err() == nil {
				c.t.Errorf("consumer of %s: move %s to %s: %v", st, j.ID, to, err)
			}
		}
		select {
		case <-added:
		case <-ctx.Done():
		}
	}
}

// run works Storing and Recording until the test ends.
func (c *storeAndRecord) run() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.work(ctx, queue.Storing, c.store) })
	wg.Go(func() { c.work(ctx, queue.Recording, c.record) })
	c.t.Cleanup(func() { cancel(); wg.Wait() })
}

// A real `ingestq serve` run with --states without storing and recording
// (the ingest pipeline, local storage) beside a program that works those
// two states from what the jobs hand on over HTTP; reporting is a second
// daemon's, which runs no job step. Both daemons rescan only once an hour:
// each step another consumer takes over, and each batch another daemon
// finished, wakes them through their ZooKeeper watches. Every job of a
// multi-object batch completes and the batch reports Completed.
func TestStatesOwnedBesideAnotherConsumer(t *testing.T) {
	t.Parallel()
	nats := startNATS(t, -1, t.TempDir()).ClientURL()
	zkAddr, root := zktest.Shared(t).Addr, zktest.Root(t)
	q, rec := openQueue(t, zkAddr, root), record(t, nats)
	content := newFiles(t)

	const objects = 5
	var lines strings.Builder
	lines.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-batch-manifest\n" +
		"#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName | mrt:primaryIdentifier | mrt:localIdentifier | mrt:creator | mrt:title | mrt:date\n")
	deposited := map[string][]byte{} // local id + "/" + file name → content
	for i := range objects {
		rows := map[string][2]any{}
		for _, name := range []string{"text.txt", "data/table v2.csv"} {
			data := []byte(strings.Repeat(fmt.Sprintf("object %d, %s\n", i, name), 100*(i+1)))
			rows[name] = [2]any{content.put(fmt.Sprintf("/o%d/%d", i, len(rows)), data), data}
			deposited[fmt.Sprintf("obj-%d/%s", i, name)] = data
		}
		url := content.put(fmt.Sprintf("/o%d.checkm", i), objectManifest(rows))
		fmt.Fprintf(&lines, "%s | | | | | o%d.checkm | | obj-%d | Author | Title %d | 2026\n", url, i, i, i)
	}
	lines.WriteString("#%eof\n")

	work := []string{"pending", "estimating", "provisioning", "downloading", "processing", "notify", "intake"}
	slow := []string{"--rescan", "1h"}
	ingest := startDaemon(t, daemonConfig{Host: "ingest", ZK: zkAddr, Root: root, NATS: nats, Ingest: true,
		Extra: append([]string{"--states", strings.Join(work, ",")}, slow...)})
	startDaemon(t, daemonConfig{Host: "reporter", ZK: zkAddr, Root: root, NATS: nats, Ingest: true,
		Extra: append([]string{"--states", "reporting"}, slow...)})
	consumer := newStoreAndRecord(t, zkAddr, root)
	consumer.run()

	b, err := q.CreateBatch(t.Context(), queue.SubmissionOf(map[string]any{"profile_name": "demo", "submitter": "test",
		"payload_url": content.put("/batch.checkm", []byte(lines.String())), "type": "auto"}))
	if err != nil {
		t.Fatal(err)
	}
	waitReport(t, rec, q, b.ID, 3*time.Minute)
	jids := assertBatchCompleted(t, q, b.ID, objects)

	// Every object reached the consumer whole, and was recorded once.
	consumer.mu.Lock()
	recorded := maps.Clone(consumer.recorded)
	consumer.mu.Unlock()
	arks := map[string]bool{}
	for _, jid := range jids {
		j, err := q.LoadJob(t.Context(), jid)
		if err != nil {
			t.Fatal(err)
		}
		ark, lid := j.Identifiers.PrimaryID, j.Identifiers.LocalIDs
		if arks[ark] || recorded[ark] != 1 || len(lid) != 1 {
			t.Errorf("job %s: ARK %s (seen before: %v), recorded %d times, local ids %v; want a new ARK recorded once", jid, ark, arks[ark], recorded[ark], lid)
		}
		arks[ark] = true
		if !strings.HasPrefix(j.Store.ManifestURL, "http://127.0.0.1:") || !strings.Contains(j.Store.ManifestURL, "/work/"+jid+"/storage-manifest?key=") {
			t.Errorf("job %s: store manifest URL %s, want the ingest daemon's", jid, j.Store.ManifestURL)
		}
		for _, name := range []string{"text.txt", "data/table v2.csv"} {
			dir := strings.NewReplacer(":", "_", "/", "_").Replace(ark)
			got, err := os.ReadFile(filepath.Join(consumer.kept, dir, "producer", filepath.FromSlash(name)))
			if want := deposited[lid[0]+"/"+name]; err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s (%s): the consumer kept producer/%s: %v, %d bytes; want the %d deposited", ark, lid[0], name, err, len(got), len(want))
			}
		}
	}

	// Who did what: the daemons never moved a job out of the states they do
	// not own, the ingest daemon made the batch's jobs and never reported,
	// the reporter reported and ran no step.
	for _, e := range rec.snapshot() {
		if e.BatchID != b.ID {
			continue
		}
		switch {
		case e.RecoveredBy != "":
			// A move of the consumer's, published by the daemon that moved
			// the job next (decision 131).
			if e.To != string(queue.Notify) || e.RecoveredBy != "ingest" {
				t.Errorf("%s recovered job %s's move to %s; want only the consumer's moves into Notify, by ingest", e.RecoveredBy, e.JobID, e.To)
			}
		case e.Kind == events.KindJob && (e.From == string(queue.Storing) || e.From == string(queue.Recording)):
			t.Errorf("%s moved job %s %s → %s: it does not own %s", e.Host, e.JobID, e.From, e.To, e.From)
		case e.Kind == events.KindJob && e.Host != "ingest":
			t.Errorf("%s moved job %s %s → %s: it owns no job state", e.Host, e.JobID, e.From, e.To)
		case e.Kind == events.KindBatch && e.To == string(queue.Processing) && e.Host != "ingest":
			t.Errorf("%s took the pending batch: it does not own intake", e.Host)
		case e.Kind == events.KindBatch && e.To != string(queue.Processing) && e.Host != "reporter":
			t.Errorf("%s moved the batch to %s: it does not own reporting", e.Host, e.To)
		}
	}
	hosts, err := q.Hosts(t.Context())
	if err != nil || len(hosts) != 2 {
		t.Fatalf("hosts: %v %v", hosts, err)
	}
	for _, h := range hosts {
		var info reactor.HostInfo
		if err := json.Unmarshal(h.Data, &info); err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"ingest": {"Pending", "Estimating", "Provisioning", "Downloading", "Processing", "Notify", "intake"},
			"reporter": {"reporting"}}[h.Name]
		if !slices.Equal(info.States, want) {
			t.Errorf("host %s says it works %v, want %v", h.Name, info.States, want)
		}
	}
	ingest.stop(30 * time.Second)
}
