package handlers_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/handlers/mint"
	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/reactor/queue"
)

// object is what a test expects one stored object to hold: producer file
// name → content.
type object map[string][]byte

// checkStored asserts a job Completed with an ARK whose latest stored
// version holds exactly want's producer files (with their digests) and the
// system files, and that the inventory recorded that version.
func (r *rig) checkStored(j *queue.Job, want object) string {
	r.t.Helper()
	if j.State() != queue.Completed {
		r.t.Fatalf("job %s (%s) is %s: %s", j.ID, j.Config.Map()["object_key"], j.State(), j.Status.Message)
	}
	if j.Identifiers == nil || !mint.Valid(j.Identifiers.PrimaryID) || j.Identifiers.LocalIDs == nil {
		r.t.Fatalf("job %s: identifiers %+v, want a valid minted ARK and a local_id list", j.ID, j.Identifiers)
	}
	ark := j.Identifiers.PrimaryID
	v, err := r.p.Primary().Latest(context.Background(), ark)
	if err != nil {
		r.t.Fatalf("storage of %s: %v", ark, err)
	}
	got := map[string]string{}
	for _, f := range v.Files {
		got[f.Name] = f.SHA256
	}
	for name, data := range want {
		if got["producer/"+name] != sha256hex(data) {
			r.t.Errorf("%s: stored producer/%s has sha256 %q, want %s", ark, name, got["producer/"+name], sha256hex(data))
		}
	}
	for _, sys := range []string{"system/mrt-erc.txt", "system/mrt-dc.xml", "system/mrt-premis.xml", "system/mrt-manifest.txt"} {
		if got[sys] == "" {
			r.t.Errorf("%s: no %s stored", ark, sys)
		}
	}
	if len(got) != len(want)+4 {
		r.t.Errorf("%s: stored %d files %v, want %d", ark, len(got), got, len(want)+4)
	}
	detail, err := r.p.Inventory().Object(context.Background(), ark)
	recs := detail.Versions
	if err == nil && len(recs) > 0 {
		r.checkPreservation(ark, recs[len(recs)-1])
	}
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Version != v.Number || len(recs[len(recs)-1].Files) != len(v.Files) {
		r.t.Errorf("%s: inventory %+v (%v), want version %d with %d files", ark, recs, err, v.Number, len(v.Files))
	}
	if _, err := readDir(r.data, "work", j.ID); err == nil {
		r.t.Errorf("job %s: working folder left behind", j.ID)
	}
	r.checkManifestURLs(j, v)
	return ark
}

// checkManifestURLs asserts that a completed job's store and inventory
// manifests were the working folder's (a rig serves none: file: URLs), and
// that the store node's copies name the stored version, which outlives the
// working folder, the primary first.
func (r *rig) checkManifestURLs(j *queue.Job, v storage.Version) {
	r.t.Helper()
	work := "file://" + filepath.ToSlash(filepath.Join(r.data, "work", j.ID))
	for _, m := range []struct {
		name string
		got  *queue.StepManifest
		want string
	}{{"store", j.Store, work + "/storage-manifest.checkm"}, {"inventory", j.Inventory, work + "/stored-version.json"}} {
		if m.got == nil || m.got.ManifestURL != m.want || m.got.Mode == "" {
			r.t.Errorf("job %s: %s %+v, want manifest_url %s and a mode", j.ID, m.name, m.got, m.want)
		}
	}
	if j.Store == nil || len(j.Store.Copies) == 0 || j.Store.Copies[0] != v.URL {
		r.t.Errorf("job %s: store %+v, want its copies to begin with the stored version's URL %s", j.ID, j.Store, v.URL)
		return
	}
	u, err := url.Parse(v.URL)
	if err != nil || u.Scheme != "file" {
		return // an HTTP store's object URL
	}
	// The version's OCFL inventory, which never changes.
	var desc struct {
		ARK  string `json:"id"`
		Head string `json:"head"`
	}
	data, err := os.ReadFile(u.Path)
	if err == nil {
		err = json.Unmarshal(data, &desc)
	}
	if err != nil || desc.ARK != v.ARK || desc.Head != fmt.Sprintf("v%d", v.Number) {
		r.t.Errorf("job %s: store copy %s: %v %+v, want the description of %s version %d", j.ID, v.URL, err, desc, v.ARK, v.Number)
	}
}

func TestObjectManifest(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	files := object{"a.txt": []byte("alpha\n"), "sub/b.txt": []byte("bravo\n"), "c d.bin": bytes.Repeat([]byte{7}, 100_000)}
	var rows []row
	for name, data := range files {
		rows = append(rows, fileRow(r.content.put("/obj/"+strings.ReplaceAll(name, " ", "_"), data), name, data))
	}
	rows[0].alg, rows[0].digest = "sha256", sha256hex(files[rows[0].name])
	b := r.submit(r.content.put("/obj.checkm", manifest("mrt-ingest-manifest", rows...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 1 || len(b.Report.SuccessfulJobs) != 1 {
		t.Fatalf("jobs %v, report %+v; want one completed", jobs, b.Report)
	}
	r.checkStored(jobs["manifest"], files)
}

func TestBatchManifest(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	objs := []object{{"one.txt": []byte("1")}, {"two.txt": []byte("22"), "deep/three.txt": []byte("333")}}
	var lines []row
	for i, o := range objs {
		var rows []row
		for name, data := range o {
			rows = append(rows, fileRow(r.content.put(fmt.Sprintf("/o%d/%s", i, name), data), name, data))
		}
		url := r.content.put(fmt.Sprintf("/o%d.checkm", i), manifest("mrt-ingest-manifest", rows...))
		lines = append(lines, row{url: url, size: -1, local: fmt.Sprintf("loc-%d", i), who: "Author", what: fmt.Sprintf("Title %d", i), when: "2026"})
	}
	b := r.submit(r.content.put("/batch.checkm", manifest("mrt-batch-manifest", lines...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2", len(jobs))
	}
	for key, j := range jobs {
		i := slices.IndexFunc(lines, func(l row) bool { return strings.HasSuffix(key, l.url) })
		ark := r.checkStored(j, objs[i])
		got, ok, err := r.p.Inventory().LookupLocalID(context.Background(), r.prof.Name, lines[i].local)
		if err != nil || !ok || got != ark {
			t.Errorf("local id %s → %q %v %v, want %s", lines[i].local, got, ok, err, ark)
		}
		if j.Metadata == nil || j.Metadata.What != lines[i].what {
			t.Errorf("job %s metadata %+v, want title %q", j.ID, j.Metadata, lines[i].what)
		}
		// The report names each object by its ARK and local id.
		r.mu.Lock()
		objects, _ := r.reached[b.ID].Attrs["objects"].(map[string]any)
		r.mu.Unlock()
		obj, _ := objects[j.ID].(map[string]any)
		if obj["primary_id"] != ark || fmt.Sprint(obj["local_id"]) != "["+lines[i].local+"]" {
			t.Errorf("the report's objects name job %s as %v, want %s with local id %s", j.ID, obj, ark, lines[i].local)
		}
	}
}

func TestSingleFileBatchManifest(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	var rows []row
	want := map[string]object{}
	for i := range 3 {
		name, data := fmt.Sprintf("file-%d.txt", i), []byte(strings.Repeat("x", i+1))
		rw := fileRow(r.content.put("/f/"+name, data), name, data)
		rw.local = fmt.Sprintf("single-%d", i)
		rows = append(rows, rw)
		want[rw.url] = object{name: data}
	}
	b := r.submit(r.content.put("/singles.checkm", manifest("mrt-single-file-batch-manifest", rows...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 3 {
		t.Fatalf("%d jobs, want 3", len(jobs))
	}
	for _, j := range jobs {
		r.checkStored(j, want[j.Config.Map()["payload_url"].(string)])
	}
}

func TestContainerBatchManifest(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	objs := []object{{"a.txt": []byte("A"), "dir/b.txt": []byte("BB")}, {"c.txt": []byte("CCC")}}
	var rows []row
	for i, o := range objs {
		z := zipOf(t, o)
		rows = append(rows, fileRow(r.content.put(fmt.Sprintf("/c%d.zip", i), z), fmt.Sprintf("c%d.zip", i), z))
	}
	b := r.submit(r.content.put("/containers.checkm", manifest("mrt-container-batch-manifest", rows...)))
	if b = r.waitBatch(b.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("batch %s: %s", b.State(), b.Status.Message)
	}
	jobs := r.jobsOf(b.ID)
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		i := slices.IndexFunc(rows, func(rw row) bool { return rw.url == j.Config.Map()["payload_url"] })
		r.checkStored(j, objs[i])
	}
}

func TestSingleFileAndZipPayloads(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	plain := []byte("just one file\n")
	zipped := object{"x.txt": []byte("x"), "y/z.txt": []byte("z")}
	b1 := r.submit(r.content.put("/paper.pdf", plain), "erc_what", "A paper")
	b2 := r.submit(r.content.put("/deposit.zip", zipOf(t, zipped)))
	for _, c := range []struct {
		b    *queue.Batch
		key  string
		want object
	}{{b1, "file", object{"paper.pdf": plain}}, {b2, "container", zipped}} {
		b := r.waitBatch(c.b.ID, queue.Completed, queue.Failed)
		if b.State() != queue.Completed {
			t.Fatalf("batch %s: %s %s", b.ID, b.State(), b.Status.Message)
		}
		jobs := r.jobsOf(b.ID)
		r.checkStored(jobs[c.key], c.want)
	}
}

// zipOf makes a zip of an object's files.
func zipOf(t *testing.T, o object) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, data := range o {
		f, err := w.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write(data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkPreservation asserts that a recorded version has its copies and the
// PREMIS events of its ingest: how it got its ARK, a digest of every file,
// a replication and a fixity check of every copy, its ingestion.
func (r *rig) checkPreservation(ark string, rec inventory.Record) {
	r.t.Helper()
	if len(rec.Replicas) == 0 {
		r.t.Errorf("%s: no copies recorded", ark)
	}
	count := map[string]int{}
	for _, e := range rec.Events {
		count[e.Type]++
		if e.Outcome != inventory.OutcomeSuccess || e.Agent == "" || e.At.IsZero() || e.Detail == "" {
			r.t.Errorf("%s: event %+v lacks an outcome, agent, date or detail", ark, e)
		}
	}
	want := map[string]int{inventory.EventIdentifierAssignment: 1, inventory.EventIngestion: 1,
		inventory.EventReplication: len(rec.Replicas), inventory.EventMessageDigestCalculation: len(rec.Files) - 2}
	for typ, n := range want {
		if count[typ] < n {
			r.t.Errorf("%s: %d %q events, want at least %d (events %v)", ark, count[typ], typ, n, count)
		}
	}
	if count[inventory.EventFixityCheck] < len(rec.Replicas) {
		r.t.Errorf("%s: %d fixity checks, want one per copy at least", ark, count[inventory.EventFixityCheck])
	}
}
