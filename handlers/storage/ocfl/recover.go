package ocfl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/handlers/storage/place"
)

// readHead reads the object's committed inventory: nil when the root has
// none. A root inventory its sidecar does not name is accepted when the
// head version's sidecar names it (a crash between the two writes of a
// commit); stale says so.
func (s *Store) readHead(ctx context.Context, root, id string) (inv *inventory, body []byte, stale bool, err error) {
	body, ok, err := readVerified(ctx, s.p, root)
	if errors.Is(err, place.ErrNotExist) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	key := root + "/" + inventoryName
	if inv, err = decode(body, key, id); err != nil {
		return nil, nil, false, err
	}
	if !ok {
		side, err := readKey(ctx, s.p, root+"/"+inv.Head+"/"+sidecarName)
		if err != nil || sidecarDigest(side) != digestOf(body) {
			return nil, nil, false, fmt.Errorf("%s does not match its sidecar nor %s's: damaged, compare it with %s/%s",
				key, inv.Head, inv.Head, inventoryName)
		}
	}
	return inv, body, !ok, nil
}

// recover returns the object's head (nil for none) after bringing the
// object root back to it: a killed writer's temporary files are removed;
// a stale root sidecar is rewritten; a version
// folder the root inventory does not name is completed when its inventory
// verifies and continues the head, and removed otherwise. The caller holds
// the ARK's lock, so no Put is writing here.
func (s *Store) recover(ctx context.Context, root, id string) (*inventory, error) {
	// A writer killed mid-write may have left a file that no key names,
	// which OCFL forbids; none is live here.
	if sw, ok := s.p.(place.Sweeper); ok {
		if err := sw.Sweep(ctx, root+"/"); err != nil {
			return nil, err
		}
	}
	keys, err := s.p.List(ctx, root+"/")
	if err != nil {
		return nil, err
	}
	if keys, err = s.removeOldTemporaries(ctx, root, keys); err != nil || len(keys) == 0 {
		return nil, err
	}
	head, body, stale, err := s.readHead(ctx, root, id)
	if err != nil {
		return nil, err
	}
	if stale {
		if err := putBytes(ctx, s.p, root+"/"+sidecarName, sidecarOf(body)); err != nil {
			return nil, err
		}
	}
	n := 0
	if head != nil {
		n = head.number()
	}
	left := leftoverVersions(keys, root, n)
	for _, k := range slices.Sorted(maps.Keys(left)) {
		if k == n+1 {
			inv, body, err := s.completable(ctx, root, id, head, k)
			if err != nil {
				return nil, err
			}
			if inv != nil {
				if err := s.commit(ctx, root, body, sidecarOf(body)); err != nil {
					return nil, err
				}
				head, n = inv, k
				continue
			}
		}
		if err := s.removeVersion(ctx, root+"/"+versionName(k)); err != nil {
			return nil, err
		}
	}
	return head, nil
}

// oldTempPrefix started the temporary files of the local place before
// decision 238 made it `.put\`, which no key can hold. The place lists
// those left by a process killed then as keys: a depositor's file may be
// named so too.
const oldTempPrefix = ".put-"

// removeOldTemporaries deletes the files an older binary's killed write
// left in the object root or beside a version's inventory, where OCFL
// allows no file but its own, so none is a depositor's (they are under a
// version's content folder), and returns the other keys. One beside the
// root inventory stayed for good: a later Put neither removed it nor
// wrote around it, and the object was invalid (E001).
func (s *Store) removeOldTemporaries(ctx context.Context, root string, keys []string) ([]string, error) {
	kept := keys[:0]
	for _, k := range keys {
		dir, name := path.Split(strings.TrimPrefix(k, root+"/"))
		_, inVersion := versionNumber(strings.TrimSuffix(dir, "/"))
		if !strings.HasPrefix(name, oldTempPrefix) || dir != "" && !inVersion {
			kept = append(kept, k)
			continue
		}
		if err := s.p.Delete(ctx, k); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// leftoverVersions returns the numbers of version folders above head.
func leftoverVersions(keys []string, root string, head int) map[int]bool {
	left := map[int]bool{}
	for _, k := range keys {
		dir, _, ok := strings.Cut(strings.TrimPrefix(k, root+"/"), "/")
		if n, isVersion := versionNumber(dir); ok && isVersion && n > head {
			left[n] = true
		}
	}
	return left
}

// completable returns version n's inventory when it verifies, is of id,
// has n as its head and keeps every version of head unchanged.
func (s *Store) completable(ctx context.Context, root, id string, head *inventory, n int) (*inventory, []byte, error) {
	vdir := root + "/" + versionName(n)
	body, ok, err := readVerified(ctx, s.p, vdir)
	if errors.Is(err, place.ErrNotExist) || (err == nil && !ok) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	inv, err := decode(body, vdir+"/"+inventoryName, id)
	if err != nil || inv.Head != versionName(n) {
		return nil, nil, nil
	}
	if head != nil {
		for name, v := range head.Versions {
			if !reflect.DeepEqual(inv.Versions[name], v) {
				return nil, nil, nil
			}
		}
	}
	return inv, body, nil
}

// removeVersion deletes an uncommitted version folder, its sidecar and
// inventory first: a folder half removed never verifies.
func (s *Store) removeVersion(ctx context.Context, vdir string) error {
	for _, k := range []string{vdir + "/" + sidecarName, vdir + "/" + inventoryName} {
		if err := s.p.Delete(ctx, k); err != nil {
			return err
		}
	}
	keys, err := s.p.List(ctx, vdir+"/")
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.p.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
