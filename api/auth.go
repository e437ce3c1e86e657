package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/ingestq/ingestq/handlers/profile"
)

// Role is what a token may do; each role may do what the ones below it may.
type Role int

// The roles, lowest first. RoleNone marks the routes anyone may read.
const (
	RoleNone    Role = iota
	RoleRead         // list and read
	RoleOperate      // submit, cancel, report; hold, release, requeue and fail jobs; hold and release batches
	RoleAdmin        // delete and purge, fail --force, queue and collection holds
)

var roleNames = map[Role]string{RoleNone: "none", RoleRead: "read", RoleOperate: "operate", RoleAdmin: "admin"}

func (r Role) String() string { return roleNames[r] }

// parseRole reads a role's name.
func parseRole(s string) (Role, bool) {
	for r, name := range roleNames {
		if name == s && r != RoleNone {
			return r, true
		}
	}
	return RoleNone, false
}

// MinTokenLength is the shortest token accepted: a short one can be
// guessed.
const MinTokenLength = 16

// Caller is who made a request: a token's name and role, or "anonymous"
// with RoleRead when no token is configured.
type Caller struct {
	Name string
	Role Role
	// Profiles are the profiles a scoped token sees and acts on; nil: all.
	Profiles []string
}

// Scoped tells whether the caller sees only some profiles' work.
func (c Caller) Scoped() bool { return c.Profiles != nil }

// Sees tells whether the caller may see and act on profile's work.
func (c Caller) Sees(profile string) bool {
	return c.Profiles == nil || slices.Contains(c.Profiles, profile)
}

// scopedTo is how a refusal names a scoped caller: "the token of NAME is
// scoped to profiles P1, P2".
func (c Caller) scopedTo() string {
	return "the token of " + c.Name + " is scoped to profiles " + strings.Join(c.Profiles, ", ")
}

// Tokens are the bearer tokens the API knows, by their SHA-256: a lookup
// by hash takes the same time whatever the token's bytes. Replace swaps
// the set while the daemon serves (serve re-reads its file on SIGHUP).
type Tokens struct {
	mu     sync.RWMutex
	byHash map[[32]byte]Caller
}

// Len is how many tokens there are.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byHash)
}

// Replace makes t the tokens of o: a request after it is judged by them,
// one under way keeps its caller.
func (t *Tokens) Replace(o *Tokens) {
	o.mu.RLock()
	byHash := o.byHash
	o.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byHash = byHash
}

// Lookup finds the caller of a token: the API's requests, and the clients
// the daemon's embedded NATS server admits, by it.
func (t *Tokens) Lookup(token string) (Caller, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.byHash[sha256.Sum256([]byte(token))]
	return c, ok
}

// add adds a token, refusing a weak or repeated one.
func (t *Tokens) add(token string, c Caller) error {
	if len(token) < MinTokenLength {
		return fmt.Errorf("token of %d characters: want at least %d (e.g. openssl rand -hex 32)", len(token), MinTokenLength)
	}
	h := sha256.Sum256([]byte(token))
	if _, dup := t.byHash[h]; dup {
		return fmt.Errorf("token given twice")
	}
	t.byHash[h] = c
	return nil
}

// EnvTokenName is who the environment's admin token (serve's
// INGESTQ_ADMIN_TOKEN) acts as: "cancelled by admin token
// (INGESTQ_ADMIN_TOKEN)" says which token, as an unnamed line's "admin
// token" does.
const EnvTokenName = "admin token (INGESTQ_ADMIN_TOKEN)"

// LoadTokens reads a tokens file (when file is not ""), one token a line:
//
//	ROLE[:PROFILE,…] TOKEN [NAME]
//
// ROLE is read, operate or admin; NAME (default "ROLE token") says who
// holds it, as "cancelled by NAME" does. PROFILEs scope a read or operate
// token to those profiles' work (an admin's acts on the whole queue: it
// cannot be scoped). Blank lines and lines starting
// with # are skipped. envToken, when not "", is one more token, an admin's,
// named EnvTokenName.
func LoadTokens(file, envToken string) (*Tokens, error) {
	t := &Tokens{byHash: map[[32]byte]Caller{}}
	if envToken != "" {
		if err := t.add(envToken, Caller{Name: EnvTokenName, Role: RoleAdmin}); err != nil {
			return nil, fmt.Errorf("the environment's API token: %w", err)
		}
	}
	if file == "" {
		return t, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("API tokens: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := t.addLine(line); err != nil {
			return nil, fmt.Errorf("API tokens %s, line %d: %w", file, n, err)
		}
	}
	return t, sc.Err()
}

func (t *Tokens) addLine(line string) error {
	f := strings.Fields(line)
	if len(f) < 2 {
		return fmt.Errorf("want ROLE[:PROFILE,…] TOKEN [NAME]")
	}
	roleName, scope, scoped := strings.Cut(f[0], ":")
	role, ok := parseRole(roleName)
	if !ok {
		return fmt.Errorf("role %q: want read, operate or admin", roleName)
	}
	c := Caller{Name: role.String() + " token", Role: role}
	if len(f) > 2 {
		c.Name = strings.Join(f[2:], " ")
	}
	if scoped {
		var err error
		if c.Profiles, err = parseScope(role, scope); err != nil {
			return err
		}
	}
	return t.add(f[1], c)
}

// parseScope reads the profiles after ROLE: of a token line.
func parseScope(role Role, scope string) ([]string, error) {
	if role == RoleAdmin {
		return nil, fmt.Errorf("admin:%s: an admin token cannot be scoped to profiles (it deletes, purges and holds across the queue); "+
			"give it no profiles, or make it operate:%s", scope, scope)
	}
	profiles := strings.Split(scope, ",")
	for _, p := range profiles {
		if err := profile.ValidName(p); err != nil {
			return nil, fmt.Errorf("%s:%s: profile name %v (want ROLE:PROFILE,PROFILE…)", role, scope, err)
		}
	}
	return profiles, nil
}

// caller finds who sends r, and whether they may do what needs role: nil
// when they may, else the problem (401 without a known token, 403 with a
// token whose role is too low).
func (t *Tokens) caller(r *http.Request, role Role) (Caller, error) {
	if role == RoleNone || t.Len() == 0 {
		return t.authorize("", role)
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if auth == "" {
		return Caller{}, unauthorized("this needs a bearer token with the " + role.String() + " role (Authorization: Bearer TOKEN)")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Caller{}, unauthorized("the Authorization header is not a bearer token (want Authorization: Bearer TOKEN)")
	}
	return t.authorize(strings.TrimSpace(token), role)
}

// Authorize is the dashboard's authorize, of the token its cookie carries:
// a token scoped to profiles is refused (403), as the dashboard's pages
// show the whole queue (its counts, holds, hosts and events).
func (t *Tokens) Authorize(token string, role Role) (Caller, error) {
	c, err := t.authorize(token, role)
	if err == nil && c.Scoped() {
		return Caller{}, &apiError{status: http.StatusForbidden, kind: "forbidden",
			msg: c.scopedTo() + ": the dashboard shows the whole queue; use the API (" + Prefix + ") with this token"}
	}
	return c, err
}

// authorize finds who holds token ("" for none), and whether they may do
// what needs role, by the API's rules: without any token configured reads
// are open and the rest refused, saying which role it needs (a read of an
// admin's, the audit, is no change).
func (t *Tokens) authorize(token string, role Role) (Caller, error) {
	if role == RoleNone {
		return Caller{Name: "anonymous"}, nil
	}
	if t.Len() == 0 {
		if role == RoleRead {
			return Caller{Name: "anonymous", Role: RoleRead}, nil
		}
		return Caller{}, unauthorized("this needs a token with the " + role.String() + " role, and this daemon has none configured: " +
			"start serve with --api-tokens FILE, or INGESTQ_ADMIN_TOKEN for an admin's")
	}
	if token == "" {
		return Caller{}, unauthorized("this needs a token with the " + role.String() + " role")
	}
	c, known := t.Lookup(token)
	if !known {
		return Caller{}, unauthorized("unknown bearer token")
	}
	if c.Role < role {
		return Caller{}, &apiError{status: http.StatusForbidden, kind: "forbidden",
			msg: fmt.Sprintf("the token of %s has the %s role; this needs %s", c.Name, c.Role, role)}
	}
	return c, nil
}

func unauthorized(msg string) error {
	return &apiError{status: http.StatusUnauthorized, kind: "unauthorized", msg: msg}
}

// Guard has h answer only a caller whose bearer token has role, by the
// API's check and in its words (401 and 403 problem documents): the
// daemon's server puts /debug/pprof/ behind an admin token, and /metrics,
// when a site asks it, behind any token. Both show the whole daemon, so a
// token scoped to profiles is refused. Without any token configured h
// answers everyone, as before.
func (t *Tokens) Guard(role Role, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.Len() > 0 {
			c, err := t.caller(r, role)
			if err == nil && c.Scoped() {
				err = &apiError{status: http.StatusForbidden, kind: "forbidden",
					msg: c.scopedTo() + ": " + r.URL.Path + " shows the whole daemon; send a token of no profiles"}
			}
			if err != nil {
				writeProblem(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
