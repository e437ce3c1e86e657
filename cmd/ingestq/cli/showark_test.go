package cli_test

import (
	"regexp"
	"strings"
	"testing"
)

// show takes an object's ARK: the job of that object, the newest when the
// object was deposited again, with a warning naming every job of it.
func TestShowByARK(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // every job of the fixture has ARK ark:/99999/fk4test
	_, err := f.conn.Set(f.root+"/jobs/"+f.p2+"/identifiers", []byte(`{"primary_id":"ark:/99999/fk4other","local_id":["x-2"]}`), -1)
	f.ok(err)

	out, stderr, code := f.run("show", "ark:/99999/fk4other")
	wantCode(t, code, 0)
	if !regexp.MustCompile("(?m)^jid: +"+f.p2+"$").MatchString(out) || stderr != "" {
		t.Errorf("show ark:/99999/fk4other: want job %s without a warning; stderr %q", f.p2, stderr)
	}

	out, stderr, code = f.run("show", "ark:/99999/fk4test")
	wantCode(t, code, 0)
	if !regexp.MustCompile("(?m)^jid: +"+f.o1+"$").MatchString(out) ||
		!strings.Contains(stderr, "3 jobs have ARK ark:/99999/fk4test") || !strings.Contains(stderr, f.p1+" "+f.failed+" "+f.o1) {
		t.Errorf("show ark:/99999/fk4test: want the newest job %s and a warning naming %s, %s and %s; stderr %q",
			f.o1, f.p1, f.failed, f.o1, stderr)
	}

	_, stderr, code = f.run("show", "ark:/99999/fk4nothing")
	wantCode(t, code, 1)
	wantErrLine(t, stderr, "ark:/99999/fk4nothing", "not found")
}
