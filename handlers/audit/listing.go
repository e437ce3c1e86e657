package audit

import (
	"slices"
	"sync"
	"time"
)

// listingKept is how long a part of a split walk keeps what it did not
// reach of each target's listing for the part that continues it.
const listingKept = 24 * time.Hour

// keptListings are the targets' listings that parts of split walks
// (Options.Limit) left, by target URL: the layout hashes ids, so a listing
// reads every object's inventory.json at the target (about 20 minutes a
// million objects on S3), and a part that continues the one before it
// (Options.After its Last) takes the rest of that listing instead. One a
// target, so what is held is at most what a whole walk holds.
type keptListings struct {
	mu sync.Mutex
	by map[string]*keptListing
}

// keptListing is the rest of one target's listing.
type keptListing struct {
	after string    // the Last of the part that kept it: only the part after it takes it
	arks  []string  // the ids after `after`, sorted
	taken time.Time // when the target was listed
	drop  *time.Timer
}

// take returns the listing of target url that a part ending at after
// kept, and forgets it; nil when there is none.
func (k *keptListings) take(url, after string) *keptListing {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.by[url]
	if l == nil || l.after != after {
		return nil
	}
	l.drop.Stop()
	delete(k.by, url)
	return l
}

// keep holds arks, the ids after `after` of target url's listing taken
// at taken, for listingKept, in place of any it held.
func (k *keptListings) keep(url, after string, arks []string, taken time.Time) {
	l := &keptListing{after: after, arks: slices.Clone(arks), taken: taken} // not the passed ids' array
	k.mu.Lock()
	defer k.mu.Unlock()
	if old := k.by[url]; old != nil {
		old.drop.Stop()
	}
	if k.by == nil {
		k.by = map[string]*keptListing{}
	}
	l.drop = time.AfterFunc(listingKept, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.by[url] == l {
			delete(k.by, url)
		}
	})
	k.by[url] = l
}
