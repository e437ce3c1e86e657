package profile

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// registryDir is where profiles are published, under the caller's root.
const registryDir = "/ingestq/profiles"

var acl = zk.WorldACL(zk.PermAll)

// Publish writes every profile of s as JSON to <root>/ingestq/profiles/<name>,
// creating the parents and overwriting an existing node. Profiles published
// earlier that are not in s are left alone: another host may still be
// running with them.
func Publish(conn *zk.Conn, root string, s *Set) error {
	if s == nil {
		return errors.New("profile: publish: nil set")
	}
	dir, err := registryPath(root)
	if err != nil {
		return err
	}
	if err := mkdirs(conn, dir); err != nil {
		return err
	}
	for _, name := range s.names {
		data, err := json.Marshal(s.byName[name])
		if err != nil {
			return fmt.Errorf("profile %q: encode: %w", name, err)
		}
		if err := upsert(conn, dir+"/"+name, data); err != nil {
			return err
		}
	}
	return nil
}

// Known reads one published profile. A profile that was never published is
// (nil, false, nil); an invalid name or a node that does not hold the
// profile it is named after is an error.
func Known(conn *zk.Conn, root, name string) (*Profile, bool, error) {
	dir, err := registryPath(root)
	if err != nil {
		return nil, false, err
	}
	if err := ValidName(name); err != nil {
		return nil, false, fmt.Errorf("profile name %w", err)
	}
	p := dir + "/" + name
	data, _, err := conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("profile: read %s: %w", p, err)
	}
	// Unknown JSON fields are allowed: a newer ingestq may have published
	// fields this one does not know.
	var prof Profile
	if err := json.Unmarshal(data, &prof); err != nil {
		return nil, false, fmt.Errorf("profile: decode %s: %w", p, err)
	}
	if prof.Name != name {
		return nil, false, fmt.Errorf("profile: %s holds profile %q", p, prof.Name)
	}
	return &prof, true, nil
}

// Published lists the names of the profiles published on the queue under
// root (none when no daemon has published any).
func Published(conn *zk.Conn, root string) ([]string, error) {
	dir, err := registryPath(root)
	if err != nil {
		return nil, err
	}
	names, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("profile: list %s: %w", dir, err)
	}
	slices.Sort(names)
	return names, nil
}

// registryPath joins root ("" or "/a/b") and the registry folder.
func registryPath(root string) (string, error) {
	root = strings.TrimRight(root, "/")
	if root != "" && !strings.HasPrefix(root, "/") {
		return "", fmt.Errorf("profile: ZooKeeper root %q must start with /", root)
	}
	return root + registryDir, nil
}

// mkdirs creates p and its missing ancestors; ones that exist are fine.
func mkdirs(conn *zk.Conn, p string) error {
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		_, err := conn.Create(p[:i], nil, 0, acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("profile: create %s: %w", p[:i], err)
		}
	}
	return nil
}

// upsert creates p with data or, if it exists, replaces its data. It tries
// again if another host deletes or creates the node in between.
func upsert(conn *zk.Conn, p string, data []byte) error {
	var err error
	for range 3 {
		_, err = conn.Create(p, data, 0, acl)
		if !errors.Is(err, zk.ErrNodeExists) {
			break
		}
		_, err = conn.Set(p, data, -1)
		if !errors.Is(err, zk.ErrNoNode) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("profile: write %s: %w", p, err)
	}
	return nil
}
