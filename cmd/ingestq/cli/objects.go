package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/handlers/fetch"
	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/internal/redact"
)

// apiFlagHelp is --api's help, for the commands that read objects.
const apiFlagHelp = "the daemon's HTTP API, asked for objects unless --inventory or --data-dir names an inventory " +
	"this command can read (env " + EnvAPI + "; token: " + EnvAPIToken + ")"

// objects reads stored objects from an inventory: by ARK, or by a local id
// within its profile.
type objects interface {
	Object(ctx context.Context, ark string) (inventory.ObjectDetail, error)
	ObjectByLocalID(ctx context.Context, profile, localID string) (inventory.ObjectDetail, error)
}

// objectFlags say which inventory a command reads objects from
// (--inventory, --data-dir, --api), and which of them the user gave.
type objectFlags struct {
	inventory, dataDir, api                string
	inventoryGiven, dataDirGiven, apiGiven bool          // by flag or environment variable
	timeout                                time.Duration // --fetch-timeout: an HTTP inventory or API that hangs
}

// objectFlagSet adds --inventory, --data-dir and --api; what says, in
// --inventory's help, what the inventory is read for.
func (a *app) objectFlagSet(fl *pflag.FlagSet, f *objectFlags, what string) {
	fl.StringVar(&f.inventory, "inventory", a.env(EnvInventory, ""), what+" (env "+EnvInventory+"): a bbolt file, postgres://… or http(s)://…")
	fl.StringVar(&f.dataDir, "data-dir", a.env(EnvDataDir, ""), "a daemon's data folder, to read its embedded inventory (env "+EnvDataDir+"; no default: serve's is read only when named)")
	fl.StringVar(&f.api, "api", a.env(EnvAPI, defaultAPI), apiFlagHelp)
	durationVar(fl, &f.timeout, "fetch-timeout", fetch.Defaults.Timeout, "an HTTP inventory or the daemon's API that moves no byte for this long (awaiting or reading its answer) fails, and is asked once more")
}

// given notes which of the object flags the user gave, on the command line
// or by their environment variables; the defaults are not given.
func (f *objectFlags) given(cmd *cobra.Command, getenv func(string) string) {
	fl := cmd.Flags()
	f.inventoryGiven = fl.Changed("inventory") || getenv(EnvInventory) != ""
	f.dataDirGiven = f.dataDir != "" // it has no default
	f.apiGiven = fl.Changed("api") || getenv(EnvAPI) != ""
}

// objectSource opens the inventory objects are read from, preferring what
// the user gave (decision 242):
//
//  1. --inventory: that one;
//  2. --data-dir: the embedded inventory there; while its daemon holds it,
//     or when there is none, the daemon's API at --api;
//  3. --api: the daemon's API;
//  4. nothing: the daemon's API at its default address. The default data
//     folder's inventory is never read unasked: it may be another queue's.
//
// A file is opened read-only and never written. done closes what it
// opened; the source's name says which inventory it is, for the output
// and for a not-found error.
func (a *app) objectSource(ctx context.Context, f objectFlags) (_ *namedObjects, done func(), _ error) {
	api := strings.TrimSuffix(f.api, "/")
	// The daemon's rule for a server that hangs (decision 346): a hung
	// inventory service or API fails the command instead of holding it.
	client := fetch.New(fetch.Config{Timeout: f.timeout, AnyAddress: true}).BackEnd() // the operator's inventory or API
	viaAPI := func(why string) (*namedObjects, func(), error) {
		a.log.Debug("asking the daemon's API for objects", "why", why, "api", api)
		return &namedObjects{objects: &apiObjects{base: api, token: a.getenv(EnvAPIToken), why: why, instead: "; or --inventory URL", elsewhere: a.liveAPIs, client: client.HTTPClient},
			name: "served by the daemon's API at " + api}, client.HTTPClient.CloseIdleConnections, nil
	}
	switch {
	case f.inventoryGiven:
		h, err := inventory.OpenReader(ctx, f.inventory, "", client) // makes nothing: an absent one is an error
		if err != nil {
			return nil, nil, err
		}
		return &namedObjects{objects: localObjects{h}, name: shownTarget(f.inventory)}, func() { _ = h.Close(); client.HTTPClient.CloseIdleConnections() }, nil
	case f.dataDirGiven:
		embedded, _ := filepath.Abs(filepath.Join(f.dataDir, "inventory.db"))
		h, err := inventory.OpenReader(ctx, embedded, "", nil)
		switch {
		case errors.Is(err, inventory.ErrLocked):
			return viaAPI("the embedded inventory " + embedded + " is in use by a running daemon")
		case errors.Is(err, fs.ErrNotExist):
			return viaAPI("there is no embedded inventory at " + embedded)
		case err != nil:
			return nil, nil, err
		}
		return &namedObjects{objects: localObjects{h}, name: embedded}, func() { _ = h.Close() }, nil
	case f.apiGiven:
		return viaAPI("--api is given")
	}
	why := "no --inventory, --data-dir or --api is given"
	embedded := filepath.Join(defaultDataDir(a.getenv), "inventory.db")
	if _, err := os.Stat(embedded); err == nil {
		why += " (the default --data-dir's inventory " + embedded + " is read only when --data-dir names it)"
	}
	return viaAPI(why)
}

// shownTarget is an --inventory as shown: a URL without its password, a
// file by its absolute path.
func shownTarget(target string) string {
	if shown := redact.Location(target); shown != target || strings.Contains(target, "://") {
		return shown
	}
	if abs, err := filepath.Abs(strings.TrimPrefix(target, "file:")); err == nil {
		return abs
	}
	return target
}

// namedObjects are objects read from the inventory its name says. A
// lookup that finds nothing says where it looked.
type namedObjects struct {
	objects
	name   string
	missed bool // a lookup found nothing
}

func (n *namedObjects) Object(ctx context.Context, ark string) (inventory.ObjectDetail, error) {
	d, err := n.objects.Object(ctx, ark)
	n.missed = n.missed || errors.Is(err, inventory.ErrNotFound)
	return d, err
}

func (n *namedObjects) ObjectByLocalID(ctx context.Context, profile, localID string) (inventory.ObjectDetail, error) {
	d, err := n.objects.ObjectByLocalID(ctx, profile, localID)
	n.missed = n.missed || errors.Is(err, inventory.ErrNotFound)
	return d, err
}

// localObjects reads an inventory opened here.
type localObjects struct{ inventory.Handle }

func (l localObjects) ObjectByLocalID(ctx context.Context, profile, localID string) (inventory.ObjectDetail, error) {
	return inventory.ObjectByLocalID(ctx, l.Handle, profile, localID)
}

// liveAPIs names, for an error, the APIs of the daemons working this
// queue (their host nodes' --advertise) other than asked: where --api
// could point when asked does not answer. "" when there are none, or
// ZooKeeper cannot tell.
func (a *app) liveAPIs(ctx context.Context, asked string) string {
	s, q, err := a.dial(ctx) // a session of its own: access request has one open
	if err != nil {
		a.log.Debug("the daemons' APIs are not known", "err", err)
		return ""
	}
	defer s.Close()
	hosts, _, err := a.ops(q).Hosts(ctx)
	if err != nil {
		a.log.Debug("the daemons' APIs are not known", "err", err)
		return ""
	}
	var urls []string
	for _, h := range hosts {
		if u := strings.TrimSuffix(h.HTTP, "/") + strings.TrimSuffix(api.Prefix, "/"); h.HTTP != "" && u != asked {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return ""
	}
	return "; the daemons working this queue serve their API at " + strings.Join(urls, ", ") + " (ingestq hosts): --api " + urls[0]
}

// apiObjects reads objects from a daemon's API (GET /objects/{ark}, GET
// /objects?profile=P&local_id=ID); the audit opens its answer (open).
type apiObjects struct {
	base, token string
	why         string // why the API is asked: said when it does not answer
	// instead is another way than the API, said when it does not answer
	// ("; or --inventory URL").
	instead string
	// tokenFrom says where the token the route takes comes from, when the
	// API refuses the CLI's ("" for any the daemon has). The API's refusal
	// says what the route needs: this says it again only as the token's
	// name ("an admin token is …"), not as a second "this needs".
	tokenFrom string
	// elsewhere names the other APIs to ask, when this one does not answer.
	elsewhere func(ctx context.Context, api string) string
	client    *http.Client
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
	resp, err := o.open(ctx, path, what)
	if err != nil {
		return d, err
	}
	defer resp.Body.Close()
	return d, json.NewDecoder(resp.Body).Decode(&d)
}

// open GETs path from the API and returns its 200 answer, whose body the
// caller closes; any other answer is an error saying why (a 404 wraps
// inventory.ErrNotFound), what naming what was asked for.
func (o *apiObjects) open(ctx context.Context, path, what string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.base+path, nil)
	if err != nil {
		return nil, err
	}
	if o.token != "" {
		req.Header.Set("Authorization", "Bearer "+o.token)
	}
	resp, err := o.client.Do(req)
	if err != nil && ctx.Err() != nil {
		return nil, err // stopped (Ctrl-C), not an API that does not answer: the other APIs are not asked
	}
	if why := untrusted(err); why != "" {
		// The daemon answered: its certificate is what to fix, not its address.
		return nil, fmt.Errorf("the daemon's API at %s answers with a certificate this machine does not accept: %s (%w)", o.base, why, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s, and the daemon's API does not answer (--api %s%s): %w%s", o.why, o.base, o.instead, err, o.elsewhere(ctx, o.base))
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		// The API's 404 is a problem document; any other is a server with no
		// such path (--api without /api/v1, another service), which the CLI
		// took for an object the inventory lacks.
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != api.ProblemMediaType {
			return nil, fmt.Errorf("api %s: %s: 404 Not Found, and not from ingestq's API (no problem document): is --api (%s) the API's root, like http://HOST:8080/api/v1?", o.base, what, EnvAPI)
		}
		return nil, fmt.Errorf("api %s: %s: %w", o.base, what, inventory.ErrNotFound)
	}
	// The API's problem document says why; a refused token is the CLI's to fix.
	var problem struct{ Detail string }
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&problem)
	msg := fmt.Sprintf("api %s: %s: %s", o.base, what, resp.Status)
	if problem.Detail != "" {
		msg += ": " + problem.Detail
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		msg += " ("
		if o.tokenFrom != "" {
			msg += o.tokenFrom + "; "
		}
		msg += "the CLI sends the token in " + EnvAPIToken
		if o.token == "" {
			msg += ", which is not set"
		}
		msg += ")"
	}
	return nil, errors.New(msg)
}

// untrusted says why a request's error is the server's certificate, and
// what to do: "" when it is not (README "Tokens": SSL_CERT_FILE).
func untrusted(err error) string {
	var (
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &authority):
		return "it is signed by an authority this machine does not trust (a self-signed certificate, or a private CA's): " +
			"give the CLI that CA's certificate, SSL_CERT_FILE=CA.pem ingestq …"
	case errors.As(err, &hostname):
		return "it is not for the host --api names: give --api a name the certificate has"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "it has expired, or is not valid yet: the daemon's operator renews it (serve --tls-cert), or this machine's clock is wrong"
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return "it is not one for a server: the daemon's operator gives serve another --tls-cert"
	case errors.As(err, &invalid): // a chain this machine refuses: Go's reason follows
		return "it is not valid here: the daemon's operator gives serve another --tls-cert"
	}
	return ""
}
