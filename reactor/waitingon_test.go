package reactor

import (
	"testing"
	"time"
)

// A wait named after a download's bytes moved says nothing of them: a job
// taken over runs its download, then its storage put, in one step, and
// the put (which calls no Moved) read "moves bytes with the storage
// target", then "no byte since" the download's end.
func TestAWaitAfterADownloadSaysNoBytesOfIt(t *testing.T) {
	var s Step
	s.Doing("the depositor's server example.org")
	s.Moved()
	if w := s.waitingOn(time.Now()); !w.Moving {
		t.Fatalf("during the download: %v; want its bytes moving", w)
	}
	s.Doing("storage target s3://bucket/ocfl")
	for _, at := range []time.Duration{0, 2 * slowStep} {
		if w := s.waitingOn(time.Now().Add(at)); w.Moving || !w.NoByteSince.IsZero() {
			t.Errorf("the storage put, %s on: %v; want it to say neither bytes moving nor since when none came", at, w)
		}
	}
}
