package api_test

import (
	"archive/zip"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
)

// A file: payload of a profile that takes local files, to be stored under
// its own name (type file, or auto for a file that is neither a checkm
// manifest nor a zip), whose name intake refuses, is refused at
// submission, naming the field, the name and why, as ingestq submit PATH
// refuses it: no batch is made. Its job failed at Downloading. A zip or a
// manifest so named under auto, type container, or a file_name given, are
// taken: no file is stored under that name.
func TestSubmitRefusesALocalFileNameIntakeRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	local := profile.Default()
	local.Name, local.AllowLocalFiles = "local", true
	set, err := profile.NewSet(local)
	must(t, err)
	must(t, profile.Publish(t.Context(), b.q, set))

	dir := t.TempDir()
	put := func(name string, data []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		must(t, os.WriteFile(path, data, 0o600))
		return (&url.URL{Scheme: "file", Path: path}).String()
	}
	spaced := put("memo ", []byte("a memo\n"))
	piped := put("c|d.txt", []byte("c or d\n"))
	zipped := filepath.Join(dir, "z|.zip")
	f, err := os.Create(zipped)
	must(t, err)
	zw := zip.NewWriter(f)
	w, err := zw.Create("inside.txt")
	must(t, err)
	_, err = w.Write([]byte("inside\n"))
	must(t, err)
	must(t, zw.Close())
	must(t, f.Close())
	zipURL := (&url.URL{Scheme: "file", Path: zipped}).String()

	for _, c := range []struct {
		body map[string]any
		want string // the rule, after the name
	}{
		{map[string]any{"payload_url": spaced}, `its name "memo " would be the stored file's, and intake refuses it: unsafe file name: ends with white space (U+0020)`},
		{map[string]any{"payload_url": piped, "type": "file"}, `its name "c|d.txt" would be the stored file's, and intake refuses it: unsafe file name`},
		{map[string]any{"payload_url": zipURL, "type": "file"}, `its name "z|.zip" would be the stored file's`},
	} {
		c.body["profile"] = "local"
		b.do("POST", "batches", adminToken, c.body).problem(t, http.StatusBadRequest, "invalid",
			`payload_url "`+c.body["payload_url"].(string)+`": `+c.want, "rename the file, or give the name to store it under as file_name")
		// Below admin, the server's path is hidden; the field and the name
		// are said.
		if p := b.do("POST", "batches", operateToken, c.body).problem(t, http.StatusBadRequest, "invalid", "payload_url ", c.want); strings.Contains(p.Detail, dir) {
			t.Errorf("an operate token was shown the server's path: %s", p.Detail)
		}
	}
	if ids, err := b.q.BatchIDs(t.Context()); err != nil || len(ids) != 0 {
		t.Fatalf("refused submissions made batches: %v %v", ids, err)
	}
	for _, body := range []map[string]any{
		{"payload_url": zipURL},
		{"payload_url": piped, "type": "container"},
		{"payload_url": piped, "file_name": "c-or-d.txt"},
	} {
		body["profile"] = "local"
		b.do("POST", "batches", operateToken, body).ok(t, http.StatusCreated, nil)
	}
}
