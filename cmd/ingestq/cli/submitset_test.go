package cli_test

import (
	"testing"

	"github.com/ingestq/ingestq/handlers/profile"
)

// --set gives a field the submission takes as a string as typed: a local
// id of digits, a year, a title of "true". Each was read as JSON (a
// number, a boolean), which the field did not take: the submission kept it
// aside and the object had no local id, date or title, and submit said
// nothing. A key that is no field of the submission is still read as JSON
// (passthrough's fail_job=3).
func TestSubmitSetGivesAStringFieldAsTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	set, err := profile.NewSet(profile.Default())
	e.ok(err)
	e.ok(profile.Publish(t.Context(), e.q, set))
	_, stderr, code := e.run("submit", "--profile", "demo", "--set", "local_id=12345", "--set", "erc_when=2024",
		"--set", "erc_what=true", "--set", "erc_who=null", "--set", "extra_count=3", "https://example.org/sheet-5.tif")
	wantCode(t, code, 0)
	batches, _, err := e.q.ListBatches(t.Context())
	if err != nil || len(batches) != 1 {
		t.Fatalf("%d batches (%v), want 1 (stderr %q)", len(batches), err, stderr)
	}
	sub := batches[0].Submission
	if sub.LocalIDs != "12345" || sub.When != "2024" || sub.What != "true" || sub.Who != "null" {
		t.Errorf("local_id %q, erc_when %q, erc_what %q, erc_who %q; want 12345, 2024, true, null as typed (kept aside: %s)",
			sub.LocalIDs, sub.When, sub.What, sub.Who, sub.Extra)
	}
	if n, ok := sub.Extra.Number("extra_count"); !ok || n != 3 {
		t.Errorf("extra_count %v (%v), want the number 3", n, ok)
	}
}
