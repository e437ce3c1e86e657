package mint

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

var acl = zk.WorldACL(zk.PermAll)

// maxRepairs bounds how often one Mint remakes nodes deleted under it, so
// a tree being torn down fails the call instead of spinning.
const maxRepairs = 3

// Minter mints ARKs from counters in ZooKeeper. It is safe for concurrent
// use, and any number of Minters on any hosts may share one ZooKeeper.
type Minter struct {
	conn *zk.Conn
	root string

	mu    sync.Mutex
	ready bool                     // the counter and record folders exist
	turns map[string]chan struct{} // per counter, one mint at a time
}

// New returns a Minter keeping its nodes under <root>/ingestq ("" for no
// prefix).
func New(conn *zk.Conn, root string) *Minter {
	return &Minter{conn: conn, root: strings.TrimRight(root, "/")}
}

func (m *Minter) counterDir() string { return m.root + "/ingestq/minter" }
func (m *Minter) recordDir() string  { return m.root + "/ingestq/minted" }

// Mint returns the ARK of job jid, minting it from the (naan, shoulder)
// counter if jid has none yet. A jid that already has an ARK gets the same
// one back, so a retry after a crash or a lost reply never mints twice.
// An error from ZooKeeper leaves nothing half-done; calling Mint again is
// the way to recover.
func (m *Minter) Mint(ctx context.Context, jid, naan, shoulder string) (string, error) {
	if err := m.check(jid); err != nil {
		return "", err
	}
	if !isDigits(naan) {
		return "", fmt.Errorf("mint %s: naan %q must be digits, e.g. \"99999\"", jid, naan)
	}
	if !isBetanumeric(shoulder) {
		return "", fmt.Errorf("mint %s: shoulder %q must be betanumeric (%s), e.g. \"fk4\"", jid, shoulder, Alphabet)
	}
	counter := m.counterDir() + "/" + naan + "-" + shoulder
	record := m.recordDir() + "/" + jid
	// Goroutines of one process take turns at a counter: racing each
	// other through ZooKeeper would only add version conflicts.
	turn := m.turn(counter)
	select {
	case turn <- struct{}{}:
		defer func() { <-turn }()
	case <-ctx.Done():
		return "", fmt.Errorf("mint %s: %w", jid, ctx.Err())
	}
	repairs := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("mint %s: %w", jid, err)
		}
		if err := m.prepare(); err != nil {
			return "", err
		}
		if a, ok, err := m.recorded(record, naan, shoulder); ok || err != nil {
			return a, err
		}
		data, stat, err := m.conn.Get(counter)
		if errors.Is(err, zk.ErrNoNode) {
			// First use of this shoulder; a concurrent creator is fine.
			_, err = m.conn.Create(counter, []byte("0"), 0, acl)
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return "", fmt.Errorf("mint %s: create counter %s: %w", jid, counter, err)
			}
			continue
		}
		if err != nil {
			return "", fmt.Errorf("mint %s: read counter %s: %w", jid, counter, err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return "", fmt.Errorf("mint %s: counter %s holds %q, not a decimal number", jid, counter, data)
		}
		a := ark(naan, shoulder, n+1)
		// Both or neither: a counter advanced without a record would burn an
		// identifier, a record without the advance would reuse one.
		res, err := m.conn.Multi(
			&zk.SetDataRequest{Path: counter, Data: []byte(strconv.FormatUint(n+1, 10)), Version: stat.Version},
			&zk.CreateRequest{Path: record, Data: []byte(a), Acl: acl},
		)
		switch {
		case err == nil:
			return a, nil
		case failedWith(res, err, zk.ErrBadVersion), failedWith(res, err, zk.ErrNodeExists):
			// Another mint took n+1, or another Mint of this jid won:
			// read again; the next round returns its record.
			if err := pause(ctx, attempt); err != nil {
				return "", fmt.Errorf("mint %s: %w", jid, err)
			}
		case failedWith(res, err, zk.ErrNoNode) && repairs < maxRepairs:
			m.unprepare() // someone removed a folder or the counter: remake it
			repairs++
		default:
			return "", fmt.Errorf("mint %s: advance %s and create %s: %w", jid, counter, record, err)
		}
	}
}

// Forget deletes jid's minting record once its job is done; the ARK itself
// stays used, since the counter never goes back. A missing record is fine.
func (m *Minter) Forget(jid string) error {
	if err := m.check(jid); err != nil {
		return err
	}
	p := m.recordDir() + "/" + jid
	if err := m.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("mint: forget %s: delete %s: %w", jid, p, err)
	}
	return nil
}

// check rejects a root or jid that would not make a valid node path.
func (m *Minter) check(jid string) error {
	if m.root != "" && !strings.HasPrefix(m.root, "/") {
		return fmt.Errorf("mint: ZooKeeper root %q must start with /", m.root)
	}
	if jid == "" || jid == "." || jid == ".." || strings.ContainsAny(jid, "/\x00") {
		return fmt.Errorf("mint: job id %q is not usable as a ZooKeeper node name", jid)
	}
	return nil
}

// recorded returns jid's ARK if one was minted. A record for another NAAN
// or shoulder is an error: the job's profile changed after minting.
func (m *Minter) recorded(record, naan, shoulder string) (string, bool, error) {
	data, _, err := m.conn.Get(record)
	if errors.Is(err, zk.ErrNoNode) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("mint: read %s: %w", record, err)
	}
	a := string(data)
	if !Valid(a) {
		return "", false, fmt.Errorf("mint: %s holds %q, not a valid ARK", record, a)
	}
	if !strings.HasPrefix(a, "ark:/"+naan+"/"+shoulder) {
		return "", false, fmt.Errorf("mint: %s holds %s, minted for another naan or shoulder than %s/%s", record, a, naan, shoulder)
	}
	return a, true, nil
}

// prepare creates the folders once per Minter (again after unprepare).
func (m *Minter) prepare() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready {
		return nil
	}
	for _, dir := range []string{m.counterDir(), m.recordDir()} {
		for i := 1; i <= len(dir); i++ {
			if i < len(dir) && dir[i] != '/' {
				continue
			}
			_, err := m.conn.Create(dir[:i], nil, 0, acl)
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("mint: create %s: %w", dir[:i], err)
			}
		}
	}
	m.ready = true
	return nil
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

func (m *Minter) unprepare() {
	m.mu.Lock()
	m.ready = false
	m.mu.Unlock()
}

// failedWith reports whether a multi failed because of target, looking at
// both the call's error and each operation's result.
func failedWith(res []zk.MultiResponse, err, target error) bool {
	if errors.Is(err, target) {
		return true
	}
	for _, r := range res {
		if errors.Is(r.Error, target) {
			return true
		}
	}
	return false
}

// pause waits a short random time after a lost race so that minters
// contending for one counter spread out instead of colliding again.
func pause(ctx context.Context, attempt int) error {
	limit := time.Duration(min(attempt+1, 20)) * time.Millisecond
	t := time.NewTimer(rand.N(limit))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sweep forgets the minting records of jobs that no longer exist (deleted
// before Notify, which forgets a completed job's record). gone tells
// whether a job is gone; a record it cannot judge is kept.
func (m *Minter) Sweep(gone func(jid string) (bool, error)) (removed []string, err error) {
	jids, _, err := m.conn.Children(m.recordDir())
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mint: sweep %s: %w", m.recordDir(), err)
	}
	var errs []error
	for _, jid := range jids {
		g, err := gone(jid)
		if err != nil || !g {
			errs = append(errs, err)
			continue
		}
		if err := m.Forget(jid); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, jid)
	}
	return removed, errors.Join(errs...)
}
