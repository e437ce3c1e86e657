package handlers_test

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/profile"
	"github.com/ingestq/ingestq/reactor"
	"github.com/ingestq/ingestq/reactor/queue"
)

// A deposit whose primary identifier names another profile's object (the
// two sharing the daemon's storage and inventory) fails at Processing,
// writing nothing: before, its Storing wrote a version into that object,
// Recording refused it, and the other profile's next deposit failed on the
// unrecorded version.
func TestPrimaryIDOfAnotherProfilesObjectIsRefused(t *testing.T) {
	t.Parallel()
	other := profile.Default()
	other.Name, other.Shoulder = "other", "fk5"
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) {
		set, err := profile.NewSet(profile.Default(), other)
		if err != nil {
			t.Fatal(err)
		}
		hc.Profiles = set
	})
	deposit := func(path string, data []byte, extra ...string) *queue.Job {
		t.Helper()
		b := r.submit(r.content.put(path, data), extra...)
		r.waitBatch(b.ID, queue.Completed, queue.Failed)
		return r.jobsOf(b.ID)["file"]
	}
	theirs := deposit("/other/a.txt", []byte("other's"), "profile_name", "other", "local_id", "o-1")
	ark := r.checkStored(theirs, object{"a.txt": []byte("other's")})

	mine := deposit("/mine/a.txt", []byte("mine"), "primary_id", ark)
	if mine.State() != queue.Failed || !strings.HasPrefix(mine.Status.Message, "Processing: primary identifier "+ark+" is an object of another profile") ||
		strings.Contains(mine.Status.Message, `"other"`) || strings.Contains(mine.Status.Message, "profile other") {
		t.Fatalf("a deposit to demo naming other's %s: job %s %q; want Failed at Processing, not naming the profile", ark, mine.State(), mine.Status.Message)
	}
	if v, err := r.p.Primary().Latest(t.Context(), ark); err != nil || v.Number != 1 {
		t.Fatalf("other's object after the refused deposit: version %d (%v), want 1", v.Number, err)
	}
	again := deposit("/other/a2.txt", []byte("other's again"), "profile_name", "other", "local_id", "o-1")
	if got := r.checkStored(again, object{"a2.txt": []byte("other's again")}); got != ark {
		t.Fatalf("other's next deposit: %s, want %s", got, ark)
	}
}
