package handlers_test

import (
	"strings"
	"testing"
	"time"

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

// Two profiles' deposits giving one new ARK at once both pass Processing
// (the inventory knows neither yet); the later to reach Storing fails
// there, as Processing refuses a known one, writing nothing and not naming
// the other profile. It wrote version 2 on top of the other's version 1,
// which its Recording then refused.
func TestOneNewARKGivenByTwoProfilesIsStoredForOne(t *testing.T) {
	t.Parallel()
	other := profile.Default()
	other.Name, other.Shoulder = "other", "fk5"
	reached, release := make(chan string, 1), make(chan struct{})
	r := newRig(t, nil, func(hc *handlers.Config, _ *reactor.Config) {
		set, err := profile.NewSet(profile.Default(), other)
		if err != nil {
			t.Fatal(err)
		}
		hc.Profiles = set
	}, beforeStep(queue.Storing, func(j *queue.Job) {
		if j.Profile() == "other" {
			return
		}
		select {
		case reached <- j.ID:
		default:
		}
		select {
		case <-release:
		case <-t.Context().Done():
		}
	}))
	const ark = "ark:/99999/fk4twoprofiles"
	mine := r.submit(r.content.put("/mine/a.txt", []byte("mine")), "primary_id", ark)
	select {
	case <-reached: // past Processing, the ARK new to the inventory
	case <-time.After(faultWait):
		t.Fatalf("the first deposit reached no Storing in %v", faultWait)
	}
	theirs := r.submit(r.content.put("/other/a.txt", []byte("other's")), "profile_name", "other", "primary_id", ark)
	if b := r.waitBatch(theirs.ID, queue.Completed, queue.Failed); b.State() != queue.Completed {
		t.Fatalf("other's deposit of %s: batch %s (%s)", ark, b.State(), b.Status.Message)
	}
	close(release)
	r.waitBatch(mine.ID, queue.Completed, queue.Failed)
	j := r.jobsOf(mine.ID)["file"]
	if j.State() != queue.Failed || !strings.HasPrefix(j.Status.Message, "Storing: primary identifier "+ark+" is an object of another profile") ||
		strings.Contains(j.Status.Message, `"other"`) || strings.Contains(j.Status.Message, "profile other") {
		t.Fatalf("demo's deposit of %s after other's: job %s %q; want Failed at Storing, not naming the profile", ark, j.State(), j.Status.Message)
	}
	if v, err := r.p.Primary().Latest(t.Context(), ark); err != nil || v.Number != 1 {
		t.Fatalf("other's object after the refused deposit: version %d (%v), want 1", v.Number, err)
	}
}
