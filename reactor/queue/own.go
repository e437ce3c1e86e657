package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ingestq/ingestq/internal/backoff"
)

// ingestq's own nodes, beside mrt-zk's layout, under /ingestq: the profiles
// the daemons publish, and the minter's counters and per-job records.
const (
	profilesDir = "/ingestq/profiles" // <name> → the profile as JSON
	countersDir = "/ingestq/minter"   // <counter> → the last number minted, in decimal
	mintedDir   = "/ingestq/minted"   // <jid> → the value minted for the job
	hostsDir    = "/ingestq/hosts"    // <name> → a live daemon's description (ephemeral)
	routesDir   = "/ingestq/routes"   // <name> → a live daemon's NATS route URL (ephemeral)
	knownDir    = "/ingestq/known"    // <name> → nothing: a name a daemon registered under, ever (persistent)
	sessionsDir = "/ingestq/sessions" // <session>-<seq> → nothing: a live session that released a lock (ephemeral; fence.go)
)

// maxRepairs bounds how often one Mint remakes folders deleted under it, so
// a tree being torn down fails the call instead of spinning.
const maxRepairs = 3

// PutProfile publishes a profile's JSON under its name, creating the node
// or replacing what is there.
func (q *Queue) PutProfile(ctx context.Context, name string, data []byte) error {
	if err := checkOwnName(name, "profile name"); err != nil {
		return err
	}
	if err := q.ensureDirs(ctx, profilesDir); err != nil {
		return err
	}
	p := q.Path(profilesDir + "/" + name)
	if err := q.commit(ctx, []op{upsert(p, data, false)}); err != nil {
		return fmt.Errorf("publish profile %s: %w", q.rel(p), err)
	}
	return nil
}

// ProfileData reads a published profile; ok is false when none is.
func (q *Queue) ProfileData(ctx context.Context, name string) (data []byte, ok bool, err error) {
	if err := checkOwnName(name, "profile name"); err != nil {
		return nil, false, err
	}
	data, _, err = q.get(ctx, q.Path(profilesDir+"/"+name))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// ProfileNames lists the published profiles, sorted.
func (q *Queue) ProfileNames(ctx context.Context) ([]string, error) {
	return q.sortedChildren(ctx, profilesDir)
}

// Mint returns the value minted for job jid from counter: the recorded one
// when there is one, else format(n+1) for the counter's n, recorded for jid
// while the counter advances, in one multi(): both or neither, so a number
// is never burnt nor used twice, and a retry after a crash or a lost reply
// gets the same value back.
func (q *Queue) Mint(ctx context.Context, counter, jid string, format func(n uint64) string) (string, error) {
	if err := checkOwnName(counter, "counter"); err != nil {
		return "", err
	}
	if err := checkOwnName(jid, "job id"); err != nil {
		return "", err
	}
	cpath, rpath := q.Path(countersDir+"/"+counter), q.Path(mintedDir+"/"+jid)
	repairs := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("mint for %s: %w", jid, err)
		}
		if err := q.ensureDirs(ctx, countersDir, mintedDir); err != nil {
			return "", err
		}
		if v, ok, err := q.Minted(ctx, jid); ok || err != nil {
			return v, err
		}
		data, st, err := q.get(ctx, cpath)
		if errors.Is(err, zk.ErrNoNode) {
			// First use of this counter; a concurrent creator is fine.
			err = q.commit(ctx, []op{createRef(cpath)})
			if err == nil {
				continue
			}
		}
		if err != nil {
			return "", fmt.Errorf("mint for %s: read counter %s: %w", jid, q.rel(cpath), err)
		}
		n, err := decodeInt(q.rel(cpath), data)
		if err == nil && n < 0 {
			err = corrupt(q.rel(cpath), "want a count, have %d", n)
		}
		if err != nil {
			return "", fmt.Errorf("mint for %s: %w", jid, err)
		}
		v := format(uint64(n) + 1)
		record := create(rpath, []byte(v))
		record.witness = true
		err = q.commit(ctx, []op{fenceSet(cpath, []byte(strconv.FormatUint(uint64(n)+1, 10)), st.Version), record})
		switch {
		case err == nil:
			return v, nil
		case errors.Is(err, ErrStale), errors.Is(err, zk.ErrNodeExists):
			// Another mint took n+1, or another Mint of this jid won: read
			// again; the next round returns its record.
			// A short random pause spreads out minters racing for one counter.
			if !backoff.Sleep(ctx, rand.N(backoff.Delay(time.Millisecond, 20*time.Millisecond, attempt)+1)) {
				return "", fmt.Errorf("mint for %s: %w", jid, ctx.Err())
			}
		case errors.Is(err, zk.ErrNoNode) && repairs < maxRepairs:
			q.folders.clear() // a folder went under us: the next round remakes it
			repairs++
		default:
			return "", fmt.Errorf("mint for %s: advance %s and record %s: %w", jid, q.rel(cpath), q.rel(rpath), err)
		}
	}
}

// Minted returns the value minted for jid, if any.
func (q *Queue) Minted(ctx context.Context, jid string) (string, bool, error) {
	if err := checkOwnName(jid, "job id"); err != nil {
		return "", false, err
	}
	data, _, err := q.get(ctx, q.Path(mintedDir+"/"+jid))
	if errors.Is(err, zk.ErrNoNode) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("mint: %w", err)
	}
	return string(data), true, nil
}

// ForgetMinted deletes jid's minting record; the value stays used, since
// the counter never goes back. A missing record is fine.
func (q *Queue) ForgetMinted(ctx context.Context, jid string) error {
	if err := checkOwnName(jid, "job id"); err != nil {
		return err
	}
	if err := q.commit(ctx, []op{delIfThere(q.Path(mintedDir + "/" + jid))}); err != nil {
		return fmt.Errorf("mint: forget %s: %w", jid, err)
	}
	return nil
}

// GiveMinted records value as jid's minted value unless jid has one; it
// returns the value jid has then.
func (q *Queue) GiveMinted(ctx context.Context, jid, value string) (string, error) {
	if err := checkOwnName(jid, "job id"); err != nil {
		return "", err
	}
	if err := q.ensureDirs(ctx, mintedDir); err != nil {
		return "", err
	}
	err := q.commit(ctx, []op{create(q.Path(mintedDir+"/"+jid), []byte(value))})
	if errors.Is(err, zk.ErrNodeExists) {
		have, _, err := q.Minted(ctx, jid)
		return have, err
	}
	if err != nil {
		return "", fmt.Errorf("mint: record %s for %s: %w", value, jid, err)
	}
	return value, nil
}

// MintedJobs lists the jobs with a minting record, sorted.
func (q *Queue) MintedJobs(ctx context.Context) ([]string, error) {
	return q.sortedChildren(ctx, mintedDir)
}

// sortedChildren lists one of ingestq's own folders; a folder never made
// is empty.
func (q *Queue) sortedChildren(ctx context.Context, dir string) ([]string, error) {
	names, err := q.children(ctx, q.Path(dir))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// ensureDirs creates folders (and their parents) under the root where
// missing; ones that exist, or appear meanwhile, are fine. Each is looked
// for once per Queue (again after a repair).
func (q *Queue) ensureDirs(ctx context.Context, dirs ...string) error {
	for _, dir := range dirs {
		if q.folders.has(q.Path(dir)) {
			continue
		}
		for i := 1; i <= len(dir); i++ {
			if i < len(dir) && dir[i] != '/' {
				continue
			}
			p := q.Path(dir[:i])
			if ok, _, err := q.zk.exists(ctx, p); err != nil {
				return fmt.Errorf("look for %s: %w", dir[:i], err)
			} else if !ok {
				if err := q.commit(ctx, []op{createRef(p)}); err != nil {
					return fmt.Errorf("create %s: %w", dir[:i], err)
				}
			}
		}
		q.folders.saw(q.Path(dir))
	}
	return nil
}

// checkOwnName rejects a name that would not make one node below a folder.
func checkOwnName(name, what string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s %q is not usable as a ZooKeeper node name", what, name)
	}
	return nil
}

// Host is a live daemon's ephemeral node: its description in
// /ingestq/hosts/<name>, or its NATS route URL in /ingestq/routes/<name>.
type Host struct {
	Name     string
	Data     []byte    // the daemon's description (JSON)
	Since    time.Time // when it registered (the node's creation)
	Modified time.Time // when it last wrote the node (a live daemon rewrites its host node every 15 s)
	Mine     bool      // registered by this Queue's session
	// Session is the daemon's ZooKeeper session (the node's ephemeral
	// owner): the locks it holds have the same owner.
	Session int64
}

// RegisterHost writes this daemon's description into its ephemeral node,
// creating it, or updating it when this session made it. A name another
// live session holds is refused: two daemons with one name would be one
// host to every reader.
//
// The name is also recorded for good under /ingestq/known (once per
// Queue), so that `hosts forget` can tell a name this queue's daemons had
// from a typo.
func (q *Queue) RegisterHost(ctx context.Context, name string, data []byte) error {
	if err := q.claimOwn(ctx, hostsDir, name, data); err != nil {
		return fmt.Errorf("register host %s: %w", name, err)
	}
	q.host.Store(&name)
	if err := q.ensureDirs(ctx, knownDir+"/"+name); err != nil {
		return fmt.Errorf("register host %s: record its name: %w", name, err)
	}
	return nil
}

// KnownHosts lists, sorted, the names daemons of this queue ever
// registered under (since ingestq recorded them).
func (q *Queue) KnownHosts(ctx context.Context) ([]string, error) {
	return q.sortedChildren(ctx, knownDir)
}

// AnnounceRoute writes the route URL of this daemon's embedded NATS server
// into its ephemeral node /ingestq/routes/<name>, for the other daemons'
// servers to join; a name another live session holds is refused, as by
// RegisterHost (a NATS cluster refuses two servers of one name too).
func (q *Queue) AnnounceRoute(ctx context.Context, name, url string) error {
	if err := q.claimOwn(ctx, routesDir, name, []byte(url)); err != nil {
		return fmt.Errorf("announce NATS route of %s: %w", name, err)
	}
	return nil
}

// Routes lists the live daemons' announced route URLs; Host.Data is the URL.
func (q *Queue) Routes(ctx context.Context) ([]Host, error) {
	return q.liveNodes(ctx, routesDir)
}

// RoutesFolder is the folder of the announced routes, to watch.
func (q *Queue) RoutesFolder() string { return q.Path(routesDir) }

// claimOwn creates dir/name as an ephemeral node holding data, or updates
// it when this session made it; another live session's is refused.
func (q *Queue) claimOwn(ctx context.Context, dir, name string, data []byte) error {
	if err := checkOwnName(name, "host name"); err != nil {
		return err
	}
	if err := q.ensureDirs(ctx, dir); err != nil {
		return err
	}
	p := q.Path(dir + "/" + name)
	_, err := q.zk.create(ctx, p, data, zk.FlagEphemeral)
	if !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	ok, st, err := q.zk.exists(ctx, p)
	switch {
	case err != nil:
		return err
	case !ok:
		return q.claimOwn(ctx, dir, name, data) // it just went: try again
	case !q.zk.owns(st):
		if q.awaitGone(ctx, p, st.EphemeralOwner) {
			return q.claimOwn(ctx, dir, name, data)
		}
		return refused("host name %s is in use by another live daemon (session 0x%x, still there after %v): give this one another --host",
			name, st.EphemeralOwner, q.nameWait)
	}
	return q.commit(ctx, []op{set(p, data, -1)})
}

// awaitGone waits up to q.nameWait for the node at p, which session owner
// holds, to go, and tells whether it went (or another session's took its
// place, which claimOwn then judges afresh).
func (q *Queue) awaitGone(ctx context.Context, p string, owner int64) bool {
	if q.nameWait <= 0 {
		return false
	}
	q.log.Warn("queue: the name's node is held by another session; waiting for it to end (a daemon of this name stopped just now?)",
		"node", q.rel(p), "session", fmt.Sprintf("0x%x", owner), "up_to", q.nameWait)
	deadline := time.NewTimer(q.nameWait)
	defer deadline.Stop()
	for {
		ok, st, fired, err := q.zk.existsW(ctx, p)
		switch {
		case err != nil:
			return false
		case !ok || st.EphemeralOwner != owner:
			return true
		}
		select {
		case <-fired:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Hosts lists the live daemons, by name.
func (q *Queue) Hosts(ctx context.Context) ([]Host, error) {
	return q.liveNodes(ctx, hostsDir)
}

// liveNodes reads the ephemeral nodes of one of ingestq's own folders.
func (q *Queue) liveNodes(ctx context.Context, dir string) ([]Host, error) {
	names, err := q.sortedChildren(ctx, dir)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = q.Path(dir + "/" + n)
	}
	var out []Host
	for i, r := range q.getAll(ctx, paths...) {
		if errors.Is(r.err, zk.ErrNoNode) {
			continue // gone since the listing
		}
		if r.err != nil {
			return nil, fmt.Errorf("read %s: %w", q.rel(paths[i]), r.err)
		}
		out = append(out, Host{Name: names[i], Data: r.data, Since: time.UnixMilli(r.stat.Ctime), Modified: time.UnixMilli(r.stat.Mtime),
			Mine: q.zk.owns(r.stat), Session: r.stat.EphemeralOwner})
	}
	return out, nil
}

// LiveHost reads the host node of the daemon called name: ok is false when
// no live daemon has that name (or the name could make no node). The Wait
// is for that node to change or go.
func (q *Queue) LiveHost(ctx context.Context, name string) (h Host, ok bool, w Wait, err error) {
	if checkOwnName(name, "host name") != nil {
		return Host{}, false, Wait{}, nil
	}
	p := q.Path(hostsDir + "/" + name)
	data, st, err := q.zk.get(ctx, p)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return Host{}, false, Wait{Path: p}, nil
	case err != nil:
		return Host{}, false, Wait{}, fmt.Errorf("read host %s: %w", name, err)
	}
	return Host{Name: name, Data: data, Since: time.UnixMilli(st.Ctime), Mine: q.zk.owns(st), Session: st.EphemeralOwner},
		true, Wait{Path: p, Present: true}, nil
}
