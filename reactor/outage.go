package reactor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ingestq/ingestq/internal/backoff"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Unavailable marks a step's error as an outage of a back end the step
// needs (what: "the inventory", "storage target s3://…"), not a fault of
// the job: the job is not failed for it, nor are its attempts spent. The
// step's state pauses on this daemon instead, and is tried again with a
// growing wait, up to outageMax, until the back end answers.
func Unavailable(what string, err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{what: what, err: err}
}

type unavailableError struct {
	what string
	err  error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("%s is unavailable: %v", e.what, e.err)
}
func (e *unavailableError) Unwrap() error { return e.err }

// IsUnavailable tells whether err is (or wraps) an Unavailable error.
func IsUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

// outageMax is the longest wait between two tries of a state whose back
// end is out: a back end that comes back is used again within it.
const outageMax = time.Minute

// WaitingPrefix starts the status message of a job whose step waits for a
// back end to come back.
const WaitingPrefix = "waiting for a back end"

// outages are the job states paused on this daemon because their steps
// found a back end out (Unavailable): while one is paused, its pool takes
// no job, and one try after the pause tells whether the back end is back.
// One job's try a pause, not every waiting job's, each with its ZooKeeper
// writes. Another daemon, which may reach the back end, is not held back.
type outages struct {
	mu     sync.Mutex
	until  map[queue.State]time.Time
	streak map[queue.State]int // tries in a row that found the back end out
}

func newOutages() *outages {
	return &outages{until: map[queue.State]time.Time{}, streak: map[queue.State]int{}}
}

// down pauses s after a try that found its back end out, and returns how
// long: base, doubled at each try in a row, at most outageMax.
func (o *outages) down(s queue.State, base time.Duration) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.streak[s]++
	d := backoff.Delay(base, outageMax, o.streak[s])
	o.until[s] = time.Now().Add(d)
	return d
}

// up ends s's outage: a step of s succeeded.
func (o *outages) up(s queue.State) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.streak[s] > 0 {
		delete(o.streak, s)
		delete(o.until, s)
	}
}

// paused tells whether s takes no job now.
func (o *outages) paused(s queue.State) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Now().Before(o.until[s])
}
