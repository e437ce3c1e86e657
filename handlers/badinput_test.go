package handlers_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/container"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// corpus is the shared manifest corpus (testdata/manifests/README.md).
const corpus = "../testdata/manifests"

// badCorpus is what each file of bad/ must fail with, end to end: the line
// the batch message names and what it says (http://HOST/ stands for the
// content server). Only empty.checkm and not-checkm.checkm are not checkm
// at all, so the batch handler refuses them before parsing, naming the URL.
var badCorpus = map[string]struct {
	line int // 0: no line, the message names the URL
	want string
}{
	"truncated.checkm":          {5, "manifest truncated: no #%eof after this line"},
	"extra-column.checkm":       {5, `column 7 ("text/markdown") is beyond the 6 named by #%fields`},
	"missing-hash-value.checkm": {4, "hash algorithm md5 without a hash value"},
	"bad-hex.checkm":            {4, "is not hexadecimal"},
	"short-hash.checkm":         {4, "has 31 characters, want 32"},
	"bad-hash-alg.checkm":       {4, `unsupported hash algorithm "crc32"`},
	"negative-size.checkm":      {4, `file size "-13" is negative`},
	"bad-size.checkm":           {4, `file size "13kb" is not a whole number`},
	"no-url.checkm":             {4, "no file URL"},
	"no-url-column.checkm":      {3, "no nfo:fileUrl column"},
	"dotdot-name.checkm":        {4, `file name "docs/../../../etc/passwd": unsafe file name`},
	"absolute-name.checkm":      {4, `file name "/etc/passwd": unsafe file name: absolute`},
	"windows-name.checkm":       {4, "has a backslash"},
	"dotdot-url.checkm":         {5, `file name ".." (from the URL): unsafe file name`},
	"duplicate-name.checkm":     {6, `duplicate file name "a.txt" (also on line 4)`},
	"file-folder-clash.checkm":  {5, `puts a file inside "docs", the file on line 4`},
	"no-entries.checkm":         {5, "no entries"},
	"data-after-eof.checkm":     {7, "data after #%eof (line 5)"},
	"fields-after-entry.checkm": {5, "#%fields after the first entry (line 4)"},
	"unknown-profile.checkm":    {2, `unknown profile "http://uc3.cdlib.org/registry/ingest/manifest/mrt-everything-manifest"`},
	"no-profile.checkm":         {2, "entry before any #%profile line"},
	"duplicate-object.checkm":   {6, `duplicate object: same URL "http://HOST/payload/hello.txt" and local identifier "obj-1" as line 4`},
	"not-an-ark.checkm":         {5, `primary identifier "hello": not an ARK: want ark:/NAAN/NAME`},
	"empty.checkm":              {0, "does not start with #%checkm"},
	"not-checkm.checkm":         {0, "does not start with #%checkm"},
}

// badCase is one bad submission and what its failure must say.
type badCase struct {
	name     string
	payload  string   // the batch's payload URL
	jobLevel bool     // caught in a job (the batch handler accepted the payload)
	want     []string // the failure message contains each of these
	once     string   // a URL the message names once, saying what happened plainly: one of said (namesOnce)
	said     []string
	b        *queue.Batch
	jobs     map[string]*queue.Job
}

// TestBadInputEndToEnd runs every kind of bad input through one daemon at
// once, beside one good batch: each fails with a message naming the line,
// entry or URL at fault, nothing lands outside the data folder, the good
// batch is stored, and the queue stays consistent.
func TestBadInputEndToEnd(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) {
		hc.Containers = container.Limits{MaxBytes: 1 << 20} // so a small zip can be a bomb
	})
	host := r.content.srv.URL + "/"
	serveCorpusPayload(t, r)
	// A leak would land beside the working folders, or above them.
	leakNames := []string{"escape.txt", "evil.txt", "passwd"}
	tmpRoot := filepath.Dir(r.data) // this test's own temporary folders
	outside := filepath.Dir(tmpRoot)
	before := existing(outside, leakNames)

	// The good batch: a two-file object, which must not notice the rest.
	good := object{"one.txt": []byte("good one\n"), "sub/two.txt": []byte("good two\n")}
	var goodRows []row
	for _, name := range []string{"one.txt", "sub/two.txt"} {
		goodRows = append(goodRows, fileRow(r.content.put("/good/"+name, good[name]), name, good[name]))
	}
	goodBatch := r.submit(r.content.put("/good.checkm", manifest("mrt-ingest-manifest", goodRows...)))

	var cases []*badCase
	add := func(c *badCase, extra ...string) {
		c.b = r.submit(c.payload, extra...)
		cases = append(cases, c)
	}

	// Every stored bad manifest, as a batch payload declared a manifest.
	// The two that are not checkm at all are refused as "auto" too: a payload
	// named .checkm that is no manifest, or an empty one, is not taken for a
	// single file to store.
	files, err := filepath.Glob(filepath.Join(corpus, "bad", "*.checkm"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad corpus: %v", err)
	}
	for _, f := range files {
		base := filepath.Base(f)
		exp, ok := badCorpus[base]
		if !ok {
			t.Errorf("bad/%s has no expectation in badCorpus", base)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		url := r.content.put("/bad/"+base, bytes.ReplaceAll(data, []byte("http://HOST/"), []byte(host)))
		want := []string{strings.ReplaceAll(exp.want, "http://HOST/", host)}
		if exp.line > 0 {
			want = append(want, fmt.Sprintf("%s:%d: ", url, exp.line))
		} else {
			want = append(want, url)
		}
		add(&badCase{name: "bad/" + base, payload: url, want: want}, "type", handlers.SubmitManifest)
		if exp.line == 0 {
			why := map[string]string{"empty.checkm": "is empty (0 bytes): nothing to ingest",
				"not-checkm.checkm": "is named as a checkm manifest but does not start with #%checkm"}[base]
			add(&badCase{name: "auto/" + base, payload: url, want: []string{url, why, "submit it with type file"}})
		}
	}

	// Generated manifests, caught by the batch handler's parse. manifest()
	// writes five header lines, so rows start on line 6.
	hello := []byte("hello, world\n")
	helloURL := r.content.put("/ok/hello.txt", hello)
	okRow := fileRow(helloURL, "hello.txt", hello)
	huge := row{url: host + "huge/" + strings.Repeat("x", 1<<20), size: -1, name: "huge.txt"}
	for _, g := range []struct {
		name, profile string
		bad           row
		want          string
	}{
		{"huge line", "mrt-ingest-manifest", huge, "line is longer than 65536 bytes"},
		{"dotdot name", "mrt-ingest-manifest", fileRow(helloURL, "../escape.txt", hello), `file name "../escape.txt": unsafe file name`},
		{"absolute name", "mrt-ingest-manifest", fileRow(helloURL, "/etc/passwd", hello), `file name "/etc/passwd": unsafe file name`},
		{"single-file dotdot name", "mrt-single-file-batch-manifest", fileRow(helloURL, "../escape.txt", hello), `file name "../escape.txt": unsafe file name`},
	} {
		url := r.content.put("/gen/"+strings.ReplaceAll(g.name, " ", "-")+".checkm", manifest(g.profile, okRow, g.bad))
		add(&badCase{name: g.name, payload: url, want: []string{url + ":7: ", g.want}})
	}

	// Bad object manifests inside a batch manifest: the batch handler only
	// lists them, so the job fails when it reads its own manifest.
	for _, g := range []struct{ name, file string }{{"nested dotdot name", "../escape.txt"}, {"nested absolute name", "/etc/passwd"}} {
		slug := strings.ReplaceAll(g.name, " ", "-")
		obj := r.content.put("/nested/"+slug+".checkm", manifest("mrt-ingest-manifest", okRow, fileRow(helloURL, g.file, hello)))
		url := r.content.put("/nested/"+slug+"-batch.checkm", manifest("mrt-batch-manifest", row{url: obj, size: -1}))
		add(&badCase{name: g.name, payload: url, jobLevel: true,
			want: []string{obj + ":7: ", fmt.Sprintf("file name %q: unsafe file name", g.file)}})
	}

	// A single file whose depositor-given name leaves the folder.
	add(&badCase{name: "file named ../escape.txt", payload: helloURL, jobLevel: true,
		want: []string{`file name "../escape.txt"`, "unsafe file name"}}, "type", handlers.SubmitFile, "filename", "../escape.txt")

	// Bad zips, as plain payloads.
	evil := zipEntries(t, map[string][]byte{"fine.txt": []byte("fine"), "../evil.txt": []byte("evil")}, zip.Deflate)
	add(&badCase{name: "zip ../evil.txt", payload: r.content.put("/zip/evil.zip", evil), jobLevel: true,
		want: []string{`entry "../evil.txt"`, "unsafe file name"}})
	bomb := zipEntries(t, map[string][]byte{"zeros.bin": make([]byte, 5<<20)}, zip.Deflate)
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes: not small", len(bomb))
	}
	add(&badCase{name: "zip bomb", payload: r.content.put("/zip/bomb.zip", bomb), jobLevel: true,
		want: []string{`entry "zeros.bin"`, "limit of 1048576 bytes"}})
	whole := zipEntries(t, map[string][]byte{"a.txt": bytes.Repeat([]byte("abc"), 1000)}, zip.Store)
	add(&badCase{name: "truncated zip", payload: r.content.put("/zip/truncated.zip", whole[:len(whole)/2]), jobLevel: true,
		want: []string{"not a zip file, or one cut short (a container payload is a zip; a tar or tar.gz is stored as one file"}})
	// A tar.gz submitted as a container: said in plain words, not archive/zip's.
	add(&badCase{name: "tar.gz as a container", payload: r.content.put("/zip/object.tar.gz", []byte("\x1f\x8b\x08 not a zip")), jobLevel: true,
		want: []string{"/zip/object.tar.gz: not a zip file, or one cut short (a container payload is a zip; a tar or tar.gz is stored as one file with type auto or file)"}},
		"type", handlers.SubmitContainer)

	// Zips as careless or hostile tools make them: each fails at Downloading,
	// before anything is unpacked where it can be, naming the container and
	// the entry in plain words (archive/zip's were "unexpected EOF", "EOF",
	// "flate: corrupt input before offset 0"); a "|" failed Processing three
	// times, and an empty zip said "the object has no files".
	text := map[string][]byte{"a.txt": bytes.Repeat([]byte("field notes "), 100)}
	for _, z := range []struct {
		name string
		zip  []byte
		typ  string
		want []string
	}{
		{"zip bzip2 entry", zipPatched(t, text, zip.Store, func(z []byte, cd int) {
			binary.LittleEndian.PutUint16(z[8:], 12)
			binary.LittleEndian.PutUint16(z[cd+10:], 12)
		}), "", []string{`entry "a.txt": is compressed with method 12 (bzip2), which ingestq cannot unpack`}},
		{"zip damaged central directory", zipPatched(t, text, zip.Store, func(z []byte, cd int) {
			binary.LittleEndian.PutUint16(z[cd+28:], 0xffff) // its name runs past the end
		}), "", []string{": not a zip file, or one cut short"}},
		{"zip damaged data", zipPatched(t, text, zip.Deflate, func(z []byte, _ int) {
			z[30+binary.LittleEndian.Uint16(z[26:])+binary.LittleEndian.Uint16(z[28:])] |= 0x06 // a reserved block type
		}), "", []string{`entry "a.txt": its compressed data is damaged`}},
		{"zip entry shorter than its header", zipPatched(t, text, zip.Store, func(z []byte, cd int) {
			binary.LittleEndian.PutUint32(z[cd+24:], 2000)
		}), "", []string{`entry "a.txt": its data ends before the 2000 bytes its header gives`}},
		{"zip entry past its end", zipPatched(t, text, zip.Store, func(z []byte, cd int) {
			binary.LittleEndian.PutUint32(z[cd+42:], 1<<20)
		}), "", []string{`entry "a.txt": its data is not where the zip's directory says`}},
		{"zip name with |", zipEntries(t, map[string][]byte{"a | b.txt": []byte("x")}, zip.Deflate), "",
			[]string{"Downloading: container ", `entry "a | b.txt": unsafe file name: has a |`}},
		{"zip name not UTF-8", zipEntries(t, map[string][]byte{"caf\x82.txt": []byte("x")}, zip.Deflate), "",
			[]string{`entry "caf\x82.txt": unsafe file name: not valid UTF-8: the zip does not mark its names as UTF-8`}},
		{"zip two entries of one name", zipPatched(t, map[string][]byte{"a.txt": []byte("1"), "b.txt": []byte("2")}, zip.Deflate, func(z []byte, _ int) {
			copy(z, bytes.ReplaceAll(z, []byte("b.txt"), []byte("a.txt")))
		}), "", []string{`entry "a.txt": duplicate of an earlier entry of the same name`}},
		{"zip file and folder of one name", zipEntries(t, map[string][]byte{"a": []byte("x"), "a/": nil}, zip.Store), "",
			[]string{`entry "a/": duplicate of entry "a": one is a file, the other a folder`}},
		{"zip folder entry with data", zipPatched(t, map[string][]byte{"ok.txt": []byte("ok"), "xx": []byte("hidden")}, zip.Store, func(z []byte, _ int) {
			copy(z, bytes.ReplaceAll(z, []byte("xx"), []byte("x/")))
		}), "", []string{`entry "x/": is a folder, but its header gives it 6 bytes of data`}},
		{"zip of no files", zipEntries(t, nil, zip.Deflate), handlers.SubmitContainer, []string{": holds no files"}},
		{"zip of folders only", zipEntries(t, map[string][]byte{"d/": nil, "d/e/": nil}, zip.Store), "", []string{": holds no files"}},
	} {
		url := r.content.put("/field/"+strings.ReplaceAll(z.name, " ", "-")+".zip", z.zip)
		var extra []string
		if z.typ != "" {
			extra = []string{"type", z.typ}
		}
		add(&badCase{name: z.name, payload: url, jobLevel: true, want: append(z.want, "container "+url+": ")}, extra...)
	}
	add(&badCase{name: "file named a | b.txt", payload: helloURL, jobLevel: true,
		want: []string{"Downloading: ", `file name "a | b.txt": unsafe file name: has a |`}}, "type", handlers.SubmitFile, "filename", "a | b.txt")

	// Object manifests whose files cannot be had as described, and dead
	// URLs (gone, refused, on no host): each message names the URL once,
	// says what happened in plain words, and names the file it was.
	dead := host + "gone/missing.txt" // never put: the server answers 404
	for _, d := range []struct {
		name, url string
		said      []string
	}{
		{"dead URL", dead, []string{"HTTP 404 Not Found"}},
		{"dead URL with a password", strings.Replace(dead, "http://", "http://depositor:s3cret@", 1), []string{"HTTP 404 Not Found"}},
		{"refused URL", refusedURL(t, "/refused.txt"), []string{"connection refused"}},
		// "no such host", or the failure of a machine without a name service
		{"URL on no host", "http://no-such-host.invalid/gone.txt", []string{"no such host", "DNS lookup of"}},
	} {
		obj := r.content.put("/fetch/"+strings.ReplaceAll(d.name, " ", "-")+".checkm",
			manifest("mrt-ingest-manifest", okRow, fileRow(d.url, "missing.txt", hello)))
		add(&badCase{name: d.name, payload: obj, jobLevel: true, want: []string{"producer/missing.txt: download "}, once: d.url, said: d.said})
	}
	noObject := host + "gone/object.checkm"
	add(&badCase{name: "dead object manifest", jobLevel: true, want: []string{"object manifest: fetch "}, once: noObject, said: []string{"HTTP 404 Not Found"},
		payload: r.content.put("/fetch/batch-of-a-dead-object.checkm", manifest("mrt-batch-manifest", row{url: noObject, size: -1}))})
	refusedPayload := refusedURL(t, "/payload.checkm")
	add(&badCase{name: "refused payload", payload: refusedPayload, want: []string{"payload: fetch "}, once: refusedPayload, said: []string{"connection refused"}})
	lying := r.content.put("/fetch/lying.txt", []byte("what the server sends!\n")) // same size: the digest is what differs
	wrong := fileRow(lying, "lying.txt", []byte("what the manifest says\n"))
	wrongURL := r.content.put("/fetch/wrong.checkm", manifest("mrt-ingest-manifest", okRow, wrong))
	add(&badCase{name: "wrong digest", payload: wrongURL, jobLevel: true, want: []string{"producer/lying.txt: ", "md5 mismatch", wrong.digest},
		once: lying, said: []string{"md5 mismatch"}})

	// Wait here, in the test's own goroutine: the rig's helpers fail r.t.
	for _, c := range cases {
		c.b = r.waitBatch(c.b.ID, queue.Completed, queue.Failed)
		c.jobs = r.jobsOf(c.b.ID)
	}
	goodBatch = r.waitBatch(goodBatch.ID, queue.Completed, queue.Failed)
	if goodBatch.State() != queue.Completed {
		t.Fatalf("good batch %s: %s %s", goodBatch.ID, goodBatch.State(), goodBatch.Status.Message)
	}
	goodJobs := r.jobsOf(goodBatch.ID)
	if len(goodJobs) != 1 {
		t.Fatalf("good batch: %d jobs, want 1", len(goodJobs))
	}
	r.checkStored(goodJobs["manifest"], good)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.b.State() != queue.Failed {
				t.Fatalf("batch %s is %s (%q), want Failed", c.b.ID, c.b.State(), c.b.Status.Message)
			}
			msg := c.b.Status.Message
			if c.jobLevel {
				if len(c.jobs) != 1 {
					t.Fatalf("%d jobs, want 1 (batch message %q)", len(c.jobs), msg)
				}
				for _, j := range c.jobs {
					if j.State() != queue.Failed {
						t.Fatalf("job %s is %s, want Failed", j.ID, j.State())
					}
					msg = j.Status.Message
				}
				if c.b.Report == nil || len(c.b.Report.FailedJobs) != 1 || len(c.b.Report.SuccessfulJobs) != 0 {
					t.Errorf("report %+v, want one failed job", c.b.Report)
				}
			} else {
				if len(c.jobs) != 0 {
					t.Errorf("%d jobs, want none: the payload was refused", len(c.jobs))
				}
				if !strings.HasPrefix(msg, "payload: ") {
					t.Errorf("batch message %q, want a payload failure", msg)
				}
			}
			t.Logf("message: %s", truncated(msg))
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q\ndoes not say %q", truncated(msg), w)
				}
			}
			if c.once != "" {
				namesOnce(t, msg, c.once, c.said...)
			}
		})
	}

	// Nothing written where it should not be.
	if err := filepath.WalkDir(tmpRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(leakNames, d.Name()) {
			t.Errorf("%s exists: a bad name was written", p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range leakNames {
		if !before[name] && existing(outside, []string{name})[name] {
			t.Errorf("%s appeared during the test", filepath.Join(outside, name))
		}
	}
	var v []queue.Violation
	r.read(func() (err error) { v, err = r.q.Check(t.Context()); return err })
	if len(v) != 0 {
		t.Errorf("queue violations: %v", v)
	}
}

// serveCorpusPayload serves testdata/manifests/payload under /payload/, as
// the corpus's URLs expect: a manifest wrongly accepted would then ingest
// and complete, and the test would say so.
func serveCorpusPayload(t *testing.T, r *rig) {
	root := filepath.Join(corpus, "payload")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		r.content.put("/payload/"+filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// existing tells which of names exist in dir.
func existing(dir string, names []string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		_, err := os.Lstat(filepath.Join(dir, n))
		out[n] = !errors.Is(err, fs.ErrNotExist)
	}
	return out
}

// zipEntries builds a zip with the given entry names as they are (zipOf's
// callers name safe files; these may not be).
func zipEntries(t *testing.T, entries map[string][]byte, method uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f, err := w.CreateHeader(&zip.FileHeader{Name: n, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(entries[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zipPatched is zipEntries's zip changed by damage, which is given the
// zip and the offset of its first central directory header.
func zipPatched(t *testing.T, entries map[string][]byte, method uint16, damage func(z []byte, cd int)) []byte {
	t.Helper()
	z := zipEntries(t, entries, method)
	cd := bytes.Index(z, []byte("PK\x01\x02"))
	if cd < 0 {
		t.Fatal("zipPatched: no central directory")
	}
	damage(z, cd)
	return z
}

// truncated shortens a message for the log: the huge line's is 1 MiB.
func truncated(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
