package mint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Counters keeps the minted numbers and the per-job records:
// [queue.Queue], the one door to ZooKeeper.
type Counters interface {
	Mint(ctx context.Context, counter, jid string, format func(n uint64) string) (string, error)
	ForgetMinted(ctx context.Context, jid string) error
	GiveMinted(ctx context.Context, jid, value string) (string, error)
	MintedJobs(ctx context.Context) ([]string, error)
}

// Minter mints ARKs from counters in ZooKeeper. It is safe for concurrent
// use, and any number of Minters on any hosts may share one ZooKeeper.
type Minter struct {
	c Counters

	mu    sync.Mutex
	turns map[string]chan struct{} // per counter, one mint at a time
}

// New returns a Minter keeping its counters in c.
func New(c Counters) *Minter { return &Minter{c: c} }

// Mint returns the ARK of job jid, minting it from the (naan, shoulder)
// counter if jid has none yet. A jid that already has an ARK gets the same
// one back, so a retry after a crash or a lost reply never mints twice.
// An error from ZooKeeper leaves nothing half-done; calling Mint again is
// the way to recover.
func (m *Minter) Mint(ctx context.Context, jid, naan, shoulder string) (string, error) {
	if !isDigits(naan) {
		return "", fmt.Errorf("mint %s: naan %q must be digits, e.g. \"99999\"", jid, naan)
	}
	if !isBetanumeric(shoulder) {
		return "", fmt.Errorf("mint %s: shoulder %q must be betanumeric (%s), e.g. \"fk4\"", jid, shoulder, Alphabet)
	}
	counter := naan + "-" + shoulder
	// Goroutines of one process take turns at a counter: racing each
	// other through ZooKeeper would only add version conflicts.
	turn := m.turn(counter)
	select {
	case turn <- struct{}{}:
		defer func() { <-turn }()
	case <-ctx.Done():
		return "", fmt.Errorf("mint %s: %w", jid, ctx.Err())
	}
	a, err := m.c.Mint(ctx, counter, jid, func(n uint64) string { return ark(naan, shoulder, n) })
	if err != nil {
		return "", err
	}
	// A record for another NAAN or shoulder: the job's profile changed
	// after minting.
	if !Valid(a) {
		return "", fmt.Errorf("mint: the record of %s holds %q, not a valid ARK", jid, a)
	}
	if !strings.HasPrefix(a, "ark:/"+naan+"/"+shoulder) {
		return "", fmt.Errorf("mint: the record of %s holds %s, minted for another naan or shoulder than %s/%s", jid, a, naan, shoulder)
	}
	return a, nil
}

// Forget deletes jid's minting record once its job is done; the ARK itself
// stays used, since the counter never goes back. A missing record is fine.
func (m *Minter) Forget(ctx context.Context, jid string) error { return m.c.ForgetMinted(ctx, jid) }

// Give records ark as jid's ARK unless jid has one; it returns the ARK jid
// has then. It is how an ARK minted for a job, whose record ZooKeeper lost
// (restored from an older snapshot), goes back to that job.
func (m *Minter) Give(ctx context.Context, jid, ark string) (string, error) {
	return m.c.GiveMinted(ctx, jid, ark)
}

// turn returns the semaphore of counter.
func (m *Minter) turn(counter string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.turns == nil {
		m.turns = map[string]chan struct{}{}
	}
	t, ok := m.turns[counter]
	if !ok {
		t = make(chan struct{}, 1)
		m.turns[counter] = t
	}
	return t
}

// Sweep forgets the minting records of jobs that no longer exist (deleted
// before Notify, which forgets a completed job's record). gone tells
// whether a job is gone; a record it cannot judge is kept.
func (m *Minter) Sweep(ctx context.Context, gone func(jid string) (bool, error)) (removed []string, err error) {
	jids, err := m.c.MintedJobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("mint: sweep: %w", err)
	}
	var errs []error
	for _, jid := range jids {
		g, err := gone(jid)
		if err != nil || !g {
			errs = append(errs, err)
			continue
		}
		if err := m.Forget(ctx, jid); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, jid)
	}
	return removed, errors.Join(errs...)
}
