package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/ingestq/ingestq/handlers/inventory"
)

// apiFlagHelp is --api's help, for the commands that read objects.
const apiFlagHelp = "the daemon's HTTP API, asked for objects while the daemon holds the embedded inventory or " +
	"this host has none (env " + EnvAPI + "; token: " + EnvAPIToken + ")"

// objects reads stored objects from an inventory: by ARK, or by a local id
// within its profile.
type objects interface {
	Object(ctx context.Context, ark string) (inventory.ObjectDetail, error)
	ObjectByLocalID(ctx context.Context, profile, localID string) (inventory.ObjectDetail, error)
}

// objectSource opens the inventory objects are read from: the one named
// (--inventory), or the embedded one in dataDir; when a running daemon
// holds that one, or this host has none (the daemon runs elsewhere, or
// with another --data-dir), the daemon's API. done closes what it opened.
func (a *app) objectSource(ctx context.Context, target, dataDir, api string) (_ objects, done func(), _ error) {
	embedded := filepath.Join(dataDir, "inventory.db")
	h, err := inventory.OpenReader(ctx, target, embedded, nil) // makes nothing: an absent one is an error
	var why string
	switch {
	case target == "" && errors.Is(err, inventory.ErrLocked):
		why = "the embedded inventory " + embedded + " is in use by a running daemon"
	case target == "" && errors.Is(err, fs.ErrNotExist):
		why = "there is no embedded inventory at " + embedded
	case err != nil:
		return nil, nil, err
	default:
		return localObjects{h}, func() { _ = h.Close() }, nil
	}
	a.log.Debug("asking the daemon's API for objects", "why", why, "api", api)
	return &apiObjects{base: strings.TrimSuffix(api, "/"), token: a.getenv(EnvAPIToken), why: why}, func() {}, nil
}

// localObjects reads an inventory opened here.
type localObjects struct{ inventory.Handle }

func (l localObjects) ObjectByLocalID(ctx context.Context, profile, localID string) (inventory.ObjectDetail, error) {
	return inventory.ObjectByLocalID(ctx, l.Handle, profile, localID)
}

// apiObjects reads objects from a daemon's API (GET /objects/{ark}, GET
// /objects?profile=P&local_id=ID).
type apiObjects struct {
	base, token string
	why         string // why the API is asked: said when it does not answer
}

func (o *apiObjects) Object(ctx context.Context, ark string) (inventory.ObjectDetail, error) {
	return o.get(ctx, "/objects/"+url.PathEscape(ark), ark)
}

func (o *apiObjects) ObjectByLocalID(ctx context.Context, profile, localID string) (inventory.ObjectDetail, error) {
	q := url.Values{"profile": {profile}, "local_id": {localID}}
	return o.get(ctx, "/objects?"+q.Encode(), fmt.Sprintf("local id %q in profile %q", localID, profile))
}

func (o *apiObjects) get(ctx context.Context, path, what string) (inventory.ObjectDetail, error) {
	var d inventory.ObjectDetail
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.base+path, nil)
	if err != nil {
		return d, err
	}
	if o.token != "" {
		req.Header.Set("Authorization", "Bearer "+o.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return d, fmt.Errorf("%s, and the daemon's API does not answer (--api %s; or --inventory URL): %w", o.why, o.base, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return d, fmt.Errorf("api %s: %s: %w", o.base, what, inventory.ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return d, fmt.Errorf("api %s: %s: %s (a token: %s)", o.base, what, resp.Status, EnvAPIToken)
	}
	return d, json.NewDecoder(resp.Body).Decode(&d)
}
