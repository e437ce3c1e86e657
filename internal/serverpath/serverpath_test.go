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
		if got := string(Hide([]byte(in), "/api/v1", "/ui/")); got != want {
			t.Errorf("Hide(%q) = %q, want %q", in, got, want)
		}
	}
}
