package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// maxRecordBody bounds a POSTed record; a version with many files is large,
// but not this large.
const maxRecordBody = 16 << 20

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
	return mux
}

func (s *server) record(w http.ResponseWriter, r *http.Request) {
	rec, status, err := decodeRecord(w, r)
	if err != nil {
		s.fail(w, r, status, err)
		return
	}
	if err := s.inv.Record(r.Context(), rec); err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrInvalid):
			status = http.StatusBadRequest
		case errors.Is(err, ErrConflict):
			status = http.StatusConflict
		case errors.Is(err, ErrMismatch):
			status = http.StatusUnprocessableEntity
		}
		s.fail(w, r, status, err)
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
	case errors.Is(err, ErrInvalid):
		s.fail(w, r, http.StatusBadRequest, err)
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		s.fail(w, r, http.StatusInternalServerError, err)
	default:
		writeJSON(w, d)
	}
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
