package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/ingestq/ingestq/handlers/inventory"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Problem is an error's answer: an RFC 9457 problem document
// (application/problem+json).
type Problem struct {
	Type     string `json:"type"`   // ProblemType + a kind, like "refused"
	Title    string `json:"title"`  // the status's text
	Status   int    `json:"status"` // the HTTP status
	Detail   string `json:"detail"` // what went wrong, in one line
	Instance string `json:"instance,omitempty"`
	// Retry marks a 503 for a part out of reach: its answer says when to
	// ask again (SetRetryAfter).
	Retry bool `json:"-"`
}

// RetryAfterSeconds is how long a 503 for ZooKeeper, the event stream or
// the inventory out of reach asks a client to wait: a read has already
// waited 5 s (the request timeout) for ZooKeeper, which elects a leader in
// seconds; sooner would ask again into the same outage, much later would
// keep a depositor waiting after it ends.
const RetryAfterSeconds = 10

// ProblemType starts the type of every problem; the kind follows.
const ProblemType = "urn:ingestq:problem:"

// ProblemMediaType is a problem document's Content-Type: the CLI tells the
// API's 404 from another server's by it.
const ProblemMediaType = "application/problem+json"

// apiError is a problem the API itself finds: bad JSON, a bad query,
// authentication.
type apiError struct {
	status int
	kind   string
	msg    string
	// lacks marks a 503 for a part this daemon has none of (no inventory,
	// no event stream): no Retry-After, as asking again cannot help.
	lacks bool
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, kind: "invalid", msg: fmt.Sprintf(format, args...)}
}

// kinds maps the errors of the service layer, the queue and the inventory
// to statuses, in the order they are tried (a refusal of a locked job is
// both ErrLocked and ErrRefused: it is "locked").
var kinds = []struct {
	err    error
	status int
	kind   string
}{
	{ops.ErrInvalid, http.StatusBadRequest, "invalid"},
	{inventory.ErrInvalid, http.StatusBadRequest, "invalid"},
	{queue.ErrNotFound, http.StatusNotFound, "not-found"},
	{inventory.ErrNotFound, http.StatusNotFound, "not-found"},
	{inventory.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{ops.ErrGone, http.StatusGone, "gone"},
	{queue.ErrIllegalTransition, http.StatusConflict, "illegal-transition"},
	{queue.ErrLocked, http.StatusConflict, "locked"},
	{queue.ErrStale, http.StatusConflict, "stale"},
	{queue.ErrRefused, http.StatusConflict, "refused"},
	// A foreign writer's item caught mid-creation is there whole in a
	// moment; one it broke stays so until mended: no fault of this server,
	// nor of the request, and asking again does not help.
	{queue.ErrCreating, http.StatusServiceUnavailable, "being-created"},
	{queue.ErrCorrupt, http.StatusConflict, "corrupt"},
	// What the request asks of ZooKeeper (a body's text, an id in its
	// URL) is more than it takes in one packet: as a body over maxBody,
	// the sender's to make smaller.
	{queue.ErrTooLarge, http.StatusRequestEntityTooLarge, "too-large"},
}

// ForCaller is err as caller is told it. A read token, or one scoped to
// profiles (a depositor's), is told of an inventory out of reach that it
// is, and not where: the database's host, name and user, and the driver's
// words, are for an unscoped operate token (their passwords masked) and
// the daemon's log.
func ForCaller(err error, caller Caller) error {
	if (caller.Role < RoleOperate || caller.Scoped()) && errors.Is(err, inventory.ErrUnavailable) {
		return errInventoryOutOfReach
	}
	return err
}

var errInventoryOutOfReach = &apiError{status: http.StatusServiceUnavailable, kind: "unavailable",
	msg: "the inventory is out of reach; the daemon's log names it and says why"}

// ProblemOf is err's problem document: its status and one-line detail,
// as a caller at d reads it (the dashboard shows the API's status, and
// advice that names its buttons).
func ProblemOf(err error, d ops.Door) Problem {
	status, kind := http.StatusInternalServerError, "internal"
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		status, kind = ae.status, ae.kind
	case queue.Unreachable(err):
		status, kind = http.StatusServiceUnavailable, "unavailable"
	default:
		for _, k := range kinds {
			if errors.Is(err, k.err) {
				status, kind = k.status, k.kind
				break
			}
		}
	}
	p := Problem{Type: ProblemType + kind, Title: http.StatusText(status), Status: status, Detail: oneLine(ops.Detail(err, d))}
	if status == http.StatusServiceUnavailable && (ae == nil || !ae.lacks) {
		p.Retry = true
	}
	return p
}

// apiOutcome is o as the API answers it: its message's advice names the
// request to make, where the CLI's names a command line.
func apiOutcome(o ops.Outcome) ops.Outcome { return o.For(ops.HTTP) }

func oneLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
}

// problemOf is err's problem document, as the API answers it.
func problemOf(err error) Problem { return ProblemOf(err, ops.HTTP) }

// writeProblem answers with err's problem document.
func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(err)
	p.Instance = r.URL.Path
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ingestq"`)
	}
	if p.Retry {
		SetRetryAfter(w.Header())
	}
	writeAs(w, ProblemMediaType, p.Status, p)
}

// SetRetryAfter gives h the Retry-After of a 503 for a part out of reach.
func SetRetryAfter(h http.Header) { h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds)) }

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeAs(w, "application/json", status, v)
}

func writeAs(w http.ResponseWriter, contentType string, status int, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, contentType = http.StatusInternalServerError, ProblemMediaType
		data, _ = json.Marshal(Problem{Type: ProblemType + "internal", Title: http.StatusText(status), Status: status,
			Detail: "encode the answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// maxBody is the largest request body read.
const maxBody = 1 << 20

// decodeBody reads r's JSON body into v: a body that is not JSON, has
// fields v does not know, or more than one value is bad input.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	// A media type's name is case-insensitive and may have parameters
	// (charset); application/jsonx or application/json-patch+json is another.
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &apiError{status: http.StatusUnsupportedMediaType, kind: "unsupported-media-type",
				msg: fmt.Sprintf("body of type %q: want application/json", ct)}
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		advice := "send less in each request"
		if strings.HasSuffix(r.URL.Path, "/access") { // an access request's size is its list of files
			advice = "name fewer files in each request (ask in several), or leave files out to ask for a whole version"
		}
		return &apiError{status: http.StatusRequestEntityTooLarge, kind: "too-large", msg: fmt.Sprintf("body over %d bytes (1 MiB): %s", maxBody, advice)}
	case err != nil:
		return badRequest("reading the body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return badRequest("empty body: want a JSON object")
		}
		return bodyError(err, data, v)
	}
	if dec.More() {
		return badRequest("malformed JSON body: more than one value")
	}
	return nil
}

// Starting answers every request 503 with detail, and Retry-After: the
// API of a daemon that has not started it yet (it waits for its host name
// first), where the server's 404 had the CLI say the daemon had no such
// route ("a daemon older than this ingestq?") or no such object.
func Starting(detail string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, &apiError{status: http.StatusServiceUnavailable, kind: "unavailable", msg: detail})
	})
}
