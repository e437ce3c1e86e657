package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
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

// lookup finds the caller of a token.
func (t *Tokens) lookup(token string) (Caller, bool) {
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
//	ROLE TOKEN [NAME]
//
// ROLE is read, operate or admin; NAME (default "ROLE token") says who
// holds it, as "cancelled by NAME" does. Blank lines and lines starting
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
		return fmt.Errorf("want ROLE TOKEN [NAME]")
	}
	role, ok := parseRole(f[0])
	if !ok {
		return fmt.Errorf("role %q: want read, operate or admin", f[0])
	}
	name := role.String() + " token"
	if len(f) > 2 {
		name = strings.Join(f[2:], " ")
	}
	return t.add(f[1], Caller{Name: name, Role: role})
}

// caller finds who sends r, and whether they may do what needs role: nil
// when they may, else the problem (401 without a known token, 403 with a
// token whose role is too low).
func (t *Tokens) caller(r *http.Request, role Role) (Caller, error) {
	if role == RoleNone || t.Len() == 0 {
		return t.Authorize("", role)
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if auth == "" {
		return Caller{}, unauthorized("this needs a bearer token with the " + role.String() + " role (Authorization: Bearer TOKEN)")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Caller{}, unauthorized("the Authorization header is not a bearer token (want Authorization: Bearer TOKEN)")
	}
	return t.Authorize(strings.TrimSpace(token), role)
}

// Authorize finds who holds token ("" for none), and whether they may do
// what needs role, by the API's rules: without any token configured reads
// are open and the rest refused, saying which role it needs (a read of an
// admin's, the audit, is no change). The dashboard asks it of the token
// its cookie carries.
func (t *Tokens) Authorize(token string, role Role) (Caller, error) {
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
	c, known := t.lookup(token)
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
