package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// forgottenDir holds the hosts an operator took out of the cluster for
// good (`ingestq hosts forget`): <name> → who and when, as JSON. Persistent:
// every daemon, now or later, drops the host's NATS server from the
// cluster's JetStream, and the host, if it ever comes back, starts its
// cluster store afresh and deletes the node.
const forgottenDir = "/ingestq/forgotten"

// ForgetHost notes that the daemon called name is gone for good. A name a
// live daemon holds (its host node or its route node) is refused: stop it
// first. Forgetting a name again rewrites data. The note and the check are
// one multi(): a create and delete of each of the name's nodes fails it if
// the node is there, so a daemon that takes the name meanwhile is never
// forgotten while it runs.
func (q *Queue) ForgetHost(ctx context.Context, name string, data []byte) error {
	if err := checkOwnName(name, "host name"); err != nil {
		return err
	}
	if err := q.ensureDirs(ctx, forgottenDir, hostsDir, routesDir); err != nil {
		return err
	}
	ops := []op{upsert(q.Path(forgottenDir+"/"+name), data, false)}
	for _, dir := range []string{hostsDir, routesDir} {
		p := q.Path(dir + "/" + name)
		absent := create(p, nil)
		absent.recover = func(_ context.Context, err error) ([]op, error) {
			if errors.Is(err, zk.ErrNodeExists) {
				return nil, errRunning
			}
			return nil, err
		}
		ops = append(ops, absent, del(p))
	}
	err := q.commit(ctx, ops)
	if errors.Is(err, errRunning) {
		return refused("host %s is running (see `ingestq hosts`): stop its daemon first; forget is for a host gone for good", name)
	}
	if err != nil {
		return fmt.Errorf("forget host %s: %w", name, err)
	}
	return nil
}

// errRunning is ForgetHost's news that a node of the host is there.
var errRunning = errors.New("host running")

// RewriteForgotten replaces the note of a forgotten host (a daemon adds
// that its server was removed); a host no longer forgotten is left so.
func (q *Queue) RewriteForgotten(ctx context.Context, name string, data []byte) error {
	if err := checkOwnName(name, "host name"); err != nil {
		return err
	}
	err := q.commit(ctx, []op{set(q.Path(forgottenDir+"/"+name), data, -1)})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("note on forgotten host %s: %w", name, err)
	}
	return nil
}

// ForgottenHosts lists the hosts taken out for good, sorted by name;
// Host.Data is what ForgetHost was given, Host.Since when.
func (q *Queue) ForgottenHosts(ctx context.Context) ([]Host, error) {
	return q.liveNodes(ctx, forgottenDir)
}

// Forgotten tells whether the host called name was taken out for good, and
// since when (the Host) if so.
func (q *Queue) Forgotten(ctx context.Context, name string) (Host, bool, error) {
	if checkOwnName(name, "host name") != nil {
		return Host{}, false, nil
	}
	hosts, err := q.ForgottenHosts(ctx)
	if err != nil {
		return Host{}, false, err
	}
	for _, h := range hosts {
		if h.Name == name {
			return h, true, nil
		}
	}
	return Host{}, false, nil
}

// Remember deletes name's note of ForgetHost: the host is back.
func (q *Queue) Remember(ctx context.Context, name string) error {
	if err := checkOwnName(name, "host name"); err != nil {
		return err
	}
	if err := q.commit(ctx, []op{delIfThere(q.Path(forgottenDir + "/" + name))}); err != nil {
		return fmt.Errorf("remember host %s: %w", name, err)
	}
	return nil
}

// ForgottenFolder is the folder of the hosts taken out for good, to watch.
func (q *Queue) ForgottenFolder() string { return q.Path(forgottenDir) }
