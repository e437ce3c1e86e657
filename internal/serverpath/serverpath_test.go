package serverpath

import "testing"

// A path or file: URL that starts a word is hidden, unless it is one of
// the server's own; a web URL's path and an ARK's are no such word.
func TestHide(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/x":                                               Hidden,
		"write /var/lib/x: no space":                               "write " + Hidden + ": no space",
		`("/srv/a b", file:///srv/c.zip).`:                         `("` + Hidden + ` b", ` + Hidden + `).`,
		"see https://example.org/a/b":                              "see https://example.org/a/b",
		"ark:/99999/fk4t1":                                         "ark:/99999/fk4t1",
		"POST /api/v1/jobs/J/fail, /ui/jobs/":                      "POST /api/v1/jobs/J/fail, /ui/jobs/",
		"/uikit/x":                                                 Hidden,
		"/jobs/jid0000000900/status: bad JSON":                     "/jobs/jid0000000900/status: bad JSON",
		`ref="/jobs/states/pending/05-jid1"`:                       `ref="/jobs/states/pending/05-jid1"`,
		"/batches/bid0000000901/status":                            "/batches/bid0000000901/status",
		"write /jobs/work/jid1/a.part":                             "write " + Hidden,
		"write /jobs/jid0000000900/producer/a":                     "write " + Hidden, // a job's folder in a working area at /jobs
		"/batches/bid0000000901/states/batch-failed/jid0000000900": "/batches/bid0000000901/states/batch-failed/jid0000000900",
		"/batch-uuids/uni-0001":                                    "/batch-uuids/uni-0001",
	} {
		if got := string(Hide([]byte(in), "", "/api/v1", "/ui/")); got != want {
			t.Errorf("Hide(%q) = %q, want %q", in, got, want)
		}
	}
}

// A queue's folders are its nodes too, under its root or as the queue
// names them: ZooKeeper out of reach, a read token was told "list [server
// path hidden]: …" for the /batches it could not list. A server's path
// under a folder of the same name, or beside the root, stays hidden.
func TestQueueFoldersShown(t *testing.T) {
	const root = "/ingestq"
	for in, want := range map[string]string{
		"list /batches: zookeeper list /ingestq/batches: no answer": "list /batches: zookeeper list /ingestq/batches: no answer",
		"/jobs":                               "/jobs",
		"/jobs/states":                        "/jobs/states",
		"/ingestq/jobs/states/downloading":    "/ingestq/jobs/states/downloading",
		"/ingestq/jobs/jid0000000900/status":  "/ingestq/jobs/jid0000000900/status",
		"/batch-uuids":                        "/batch-uuids",
		"/access/small":                       "/access/small",
		"/ingestq/access/large/qid0000000003": "/ingestq/access/large/qid0000000003",
		"/locks/collections":                  "/locks/collections",
		"/ingestq/ingestq/hosts/ingest1":      "/ingestq/ingestq/hosts/ingest1",
		"create /ingestq: no answer":          "create /ingestq: no answer",
		"write /ingestq/jobs/jid1/producer/a": "write " + Hidden, // a working area at /ingestq/jobs
		"open /ingestq/work/jid0000000900":    "open " + Hidden,
		"open /ingestq-data/batches":          "open " + Hidden,
		"open /srv/batches":                   "open " + Hidden,
		"open /var/lib/ingestq/jobs/states":   "open " + Hidden,
		"open /ingestq/hosts/ingest1":         "open " + Hidden, // the host nodes' folder is under the root's /ingestq
	} {
		if got := string(Hide([]byte(in), root, "/api/v1")); got != want {
			t.Errorf("Hide(%q) under root %s = %q, want %q", in, root, got, want)
		}
	}
}
