package ocfl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/ingestq/ingestq/handlers/storage"
	"github.com/ingestq/ingestq/handlers/storage/place"
)

// The storage root's and objects' conformance declarations (NAMASTE).
const (
	rootDeclaration   = "0=ocfl_1.1"
	rootDeclared      = "ocfl_1.1\n"
	objectDeclaration = "0=ocfl_object_1.1"
	objectDeclared    = "ocfl_object_1.1\n"
	layoutFile        = "ocfl_layout.json"
	layoutConfigFile  = "extensions/" + layoutName + "/config.json"
)

// Store keeps objects as OCFL 1.1 objects in a storage root; see the
// package doc.
type Store struct {
	p     place.Place
	locks [64]sync.Mutex // Puts of one ARK run one at a time (striped by ARK)
}

var _ storage.Store = (*Store)(nil)

// ErrNoRoot is returned (wrapped) by Open for a place without a storage
// root's declaration.
var ErrNoRoot = errors.New("no OCFL storage root")

// New opens the storage root in p, creating it when p is empty. A place
// holding anything else is refused.
func New(ctx context.Context, p place.Place) (*Store, error) { return open(ctx, p, true) }

// Open opens the storage root in p and writes nothing: a place without
// one (empty, or a creation that died before its declaration) is
// ErrNoRoot, not made a root. For readers, such as the audit.
func Open(ctx context.Context, p place.Place) (*Store, error) { return open(ctx, p, false) }

func open(ctx context.Context, p place.Place, create bool) (*Store, error) {
	s := &Store{p: p}
	decl, err := readKey(ctx, p, rootDeclaration)
	switch {
	case errors.Is(err, place.ErrNotExist) && !create:
		return nil, fmt.Errorf("ocfl: %w at %s (no %s)", ErrNoRoot, p, rootDeclaration)
	case errors.Is(err, place.ErrNotExist):
		err = s.create(ctx)
	case err == nil:
		err = s.checkRoot(ctx, decl)
	}
	if err != nil {
		return nil, fmt.Errorf("ocfl: storage root %s: %w", p, err)
	}
	return s, nil
}

// create writes a new storage root's files, the declaration last: a place
// holding only the first two is a creation that died, and is taken over.
func (s *Store) create(ctx context.Context) error {
	keys, err := s.p.List(ctx, "")
	if err != nil {
		return err
	}
	ours := []string{layoutConfigFile, layoutFile}
	if others := slices.DeleteFunc(keys, func(k string) bool { return slices.Contains(ours, k) }); len(others) > 0 {
		return fmt.Errorf("holds %d files but no OCFL 1.1 declaration (%s), e.g. %s: give an empty folder or bucket, or an OCFL 1.1 storage root",
			len(others), rootDeclaration, strings.Join(others[:min(3, len(others))], ", "))
	}
	for _, f := range []struct {
		key  string
		body []byte
	}{
		{layoutConfigFile, jsonFile(ourLayout)},
		{layoutFile, jsonFile(ourLayoutDoc)},
		{rootDeclaration, []byte(rootDeclared)},
	} {
		if err := putBytes(ctx, s.p, f.key, f.body); err != nil {
			return err
		}
	}
	return nil
}

// checkRoot accepts an OCFL 1.1 storage root with our layout.
func (s *Store) checkRoot(ctx context.Context, decl []byte) error {
	if string(decl) != rootDeclared {
		return fmt.Errorf("%s holds %q, not %q", rootDeclaration, decl, rootDeclared)
	}
	var doc layoutDoc
	var conf layoutConfig
	if err := readJSON(ctx, s.p, layoutFile, &doc); err != nil {
		return err
	}
	if err := readJSON(ctx, s.p, layoutConfigFile, &conf); err != nil {
		return err
	}
	if doc.Extension != layoutName || conf != ourLayout {
		return fmt.Errorf("layout %q with %+v: this store reads and writes %s with %+v only", doc.Extension, conf, layoutName, ourLayout)
	}
	return nil
}

func readJSON(ctx context.Context, p place.Place, key string, v any) error {
	b, err := readKey(ctx, p, key)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// jsonFile is the bytes of one of our small JSON files, indented.
func jsonFile(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ") // plain structs: cannot fail
	return append(b, '\n')
}

// lock takes the lock of ark's stripe and returns its release. The
// caller's ZooKeeper storage lock keeps hosts apart; this keeps goroutines.
func (s *Store) lock(ark string) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(ark))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// location names key for people and manifests: a file: URL on a local
// place, the place's URL and the key otherwise.
func (s *Store) location(key string) string {
	base := s.p.String()
	if strings.HasPrefix(base, "/") {
		return (&url.URL{Scheme: "file", Path: base + "/" + key}).String()
	}
	return strings.TrimSuffix(base, "/") + "/" + key
}

func putBytes(ctx context.Context, p place.Place, key string, b []byte) error {
	return p.Put(ctx, key, bytes.NewReader(b), int64(len(b)), digestOf(b))
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
