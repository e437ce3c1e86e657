package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
)

// maxRecordBody bounds a POSTed record; a version with many files is large,
// but not this large.
const maxRecordBody = 16 << 20

// MaxPage is the most object rows the server gives a page: a larger limit
// is served as MaxPage, which [Inventory.List] allows (a walk goes on to an
// empty page, whatever the size of each), and keeps an answer bounded.
const MaxPage = 1000

// server serves an inventory over the protocol [HTTP] speaks.
type server struct {
	inv Inventory
	log *slog.Logger
}

// NewServer returns a handler serving inv (a [Local], a [Postgres]) to
// [HTTP] clients:
//
//	POST /records                 a Record as JSON → 204; 409 local id conflict
//	GET  /localids/{profile}/{id} → {"ark": …}; 404 when none
//	GET  /objects/{ark}           → an ObjectDetail; 404 when none
//	GET  /objects/{ark}?versions=latest → the same with the latest version alone
//	GET  /objects?after={ark}&limit={n} → a page of ObjectRows ([Inventory.List]):
//	                                      limit MaxPage when absent or larger
//
// A malformed record is 400, one too large 413, and one contradicting the
// inventory ([ErrMismatch]) 422: never 409, which the client reports as
// [ErrConflict]. The client reports those as refusals ([Refused]). Other
// failures of the inventory are 500, which the client retries. A nil log
// discards.
func NewServer(inv Inventory, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &server{inv: inv, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /records", s.record)
	// The client escapes "/" in a segment as %2F; ServeMux matches escaped
	// segments and PathValue unescapes them.
	mux.HandleFunc("GET /localids/{profile}/{id}", s.lookup)
	mux.HandleFunc("GET /objects/{ark}", s.object)
	mux.HandleFunc("GET /objects", s.list)
	return mux
}

func (s *server) record(w http.ResponseWriter, r *http.Request) {
	rec, status, err := decodeRecord(w, r)
	if err != nil {
		s.fail(w, r, status, err)
		return
	}
	if err := s.inv.Record(r.Context(), rec); err != nil {
		s.fail(w, r, statusOf(err), err)
		return
	}
	s.log.Info("inventory server: recorded", "ark", rec.ARK, "version", rec.Version, "profile", rec.Profile, "job", rec.Job)
	w.WriteHeader(http.StatusNoContent)
}

// decodeRecord reads one JSON record, and nothing after it, from the body;
// on error it returns the status to answer.
func decodeRecord(w http.ResponseWriter, r *http.Request) (Record, int, error) {
	var rec Record
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRecordBody))
	err := dec.Decode(&rec)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return rec, http.StatusRequestEntityTooLarge, fmt.Errorf("record body is larger than %d bytes", tooBig.Limit)
	case err != nil:
		return rec, http.StatusBadRequest, fmt.Errorf("record body: %w", err)
	}
	return rec, 0, nil
}

func (s *server) lookup(w http.ResponseWriter, r *http.Request) {
	profile, id := r.PathValue("profile"), r.PathValue("id")
	if err := checkLookup(profile, id); err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ark, ok, err := s.inv.LookupLocalID(r.Context(), profile, id)
	switch {
	case err != nil:
		s.fail(w, r, http.StatusInternalServerError, err)
	case !ok:
		http.Error(w, fmt.Sprintf("no local id %q in profile %q", id, profile), http.StatusNotFound)
	default:
		writeJSON(w, struct {
			ARK string `json:"ark"`
		}{ark})
	}
}

func (s *server) object(w http.ResponseWriter, r *http.Request) {
	ark := r.PathValue("ark")
	var d ObjectDetail
	var err error
	if r.URL.Query().Get("versions") == "latest" {
		var rec Record
		rec, err = s.inv.Latest(r.Context(), ark)
		d = ObjectDetail{Object: ObjectRow{ARK: ark, Profile: rec.Profile, LatestVersion: rec.Version}, Versions: []Record{rec}}
	} else {
		d, err = s.inv.Object(r.Context(), ark)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		s.fail(w, r, statusOf(err), err)
	default:
		writeJSON(w, d)
	}
}

func (s *server) list(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	after, limit := query.Get("after"), MaxPage
	if query.Has("limit") {
		n, err := strconv.Atoi(query.Get("limit"))
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("inventory: %w list of objects after %q: limit %q is not a whole number", ErrInvalid, after, query.Get("limit")))
			return
		}
		limit = min(n, MaxPage)
	}
	page, err := s.inv.List(r.Context(), after, limit)
	if err != nil {
		s.fail(w, r, statusOf(err), err)
		return
	}
	if page == nil {
		page = []ObjectRow{} // an empty page is [], not null
	}
	writeJSON(w, page)
}

// statusOf is the status that answers err, a failure of the inventory: a
// refusal the client tells apart ([answered]), else 500, which it retries.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrMismatch):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers status with err's message, which the client quotes.
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	level := slog.LevelWarn
	if status >= 500 {
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "inventory server: request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	http.Error(w, err.Error(), status)
}
