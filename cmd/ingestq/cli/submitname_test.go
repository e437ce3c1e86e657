package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
)

// A local payload whose own name would be the stored file's, and which
// intake refuses (checkm.CleanName), is refused by submit with exit 2,
// naming the file, the rule and the way out, and makes no batch: its job
// would have failed at Downloading. A zip or a manifest (type auto looks
// at the file as the daemon does), --type container, or a name given with
// --set file_name stores no file under the payload's name: taken (an
// empty --set file_name= names none: refused).
func TestSubmitRefusesALocalFileNameIntakeRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	local := *profile.Default()
	local.Name, local.AllowLocalFiles = "local", true
	set, err := profile.NewSet(profile.Default(), &local)
	e.ok(err)
	e.ok(profile.Publish(t.Context(), e.q, set))
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		e.ok(os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	zip := "PK\x03\x04 the rest of a zip"
	refused := []struct {
		args []string
		why  string
	}{
		{[]string{file("memo.txt ", "plain text\n")}, "ends with white space"},
		{[]string{"--type", "file", file("a|b.txt", "plain text\n")}, "has a |"},
		{[]string{file("report\u202etxt.exe", "plain text\n")}, "bidirectional control character U+202E"},
		{[]string{"--type", "file", file("archive |1.zip", zip)}, "has a |"},          // a zip stored as a file
		{[]string{"--set", "file_name=", file("c|d.txt", "plain text\n")}, "has a |"}, // an empty name is none
	}
	for _, c := range refused {
		path := c.args[len(c.args)-1]
		_, stderr, code := e.run(append([]string{"submit", "--profile", "local"}, c.args...)...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, "payload", filepath.Base(dir), "intake refuses it", c.why, "rename the file", "--set file_name=NAME")
		if t.Failed() {
			t.Fatalf("submit %q: stderr %q", path, stderr)
		}
	}
	if batches, _, err := e.q.ListBatches(t.Context()); err != nil || len(batches) != 0 {
		t.Fatalf("refused submissions made %d batches (%v)", len(batches), err)
	}

	taken := [][]string{
		{file("photos |2024.zip", zip)},
		{file("list |1.checkm", "#%checkm_0.7\n")},
		{"--type", "container", file("more |2024.zip", zip)},
		{"--set", "file_name=a-b.txt", filepath.Join(dir, "a|b.txt")},
	}
	for _, args := range taken {
		_, stderr, code := e.run(append([]string{"submit", "--profile", "local"}, args...)...)
		if code != 0 {
			t.Errorf("submit %q: exit %d (%s), want it taken", args, code, stderr)
		}
	}
	if batches, _, err := e.q.ListBatches(t.Context()); err != nil || len(batches) != len(taken) {
		t.Fatalf("%d batches (%v), want %d", len(batches), err, len(taken))
	}
}
