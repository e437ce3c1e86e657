package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ingestq/ingestq/internal/sha256hex"
)

// maxVersionPart bounds the "version" JSON part, the only part held in memory.
const maxVersionPart = 1 << 20

// server serves a Local store over the protocol [HTTP] speaks.
type server struct {
	l   *Local
	log *slog.Logger
}

// NewServer returns a handler serving l to [HTTP] clients:
//
//	POST /objects        multipart "version" + one "file" part per file → {ark, number, changed, created, message}
//	GET  /objects/{ark}  → the latest Version as JSON; 404 when none
//	GET  /objects/{ark}?versions=all → {ark, versions}: every Version, oldest
//	                       first, each file's size as stored (-1: its copy is gone)
//	GET  /content/{ark}?version=N&file=NAME → the bytes of that file
//
// Uploaded files are streamed to a temporary folder under os.TempDir
// (TMPDIR), checked against their declared sizes and digests, and handed to
// l.Put; the folder is removed when the request ends. A request at fault
// gets 400 with a message naming the file; anything else 500. A nil log
// discards.
func NewServer(l *Local, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &server{l: l, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /objects", s.put)
	// ARKs hold "/": the client escapes them as %2F, and "..." also takes
	// a path from a client that does not.
	mux.HandleFunc("GET /objects/{ark...}", s.object)
	mux.HandleFunc("GET /content/{ark...}", s.content)
	return mux
}

// badRequest marks an error as the request's fault (400).
type badRequest struct{ err error }

func (e badRequest) Error() string { return e.err.Error() }
func (e badRequest) Unwrap() error { return e.err }

func bad(format string, a ...any) error { return badRequest{fmt.Errorf(format, a...)} }

func (s *server) put(w http.ResponseWriter, r *http.Request) {
	v, err := s.receive(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("storage server: put", "ark", v.ARK, "version", v.Number, "changed", v.Changed, "files", len(v.Files))
	writeJSON(w, putReply{ARK: v.ARK, Number: v.Number, Changed: v.Changed, Created: v.Created, Message: v.Message})
}

// receive reads one Put request into a temporary folder and stores it.
func (s *server) receive(r *http.Request) (Version, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return Version{}, bad("not a multipart/form-data body: %w", err)
	}
	meta, err := readVersionPart(mr)
	if err != nil {
		return Version{}, err
	}
	tmp, err := os.MkdirTemp("", "ingestq-upload-")
	if err != nil {
		return Version{}, fmt.Errorf("object %s: temporary folder: %w", meta.ARK, err)
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			s.log.Error("storage server: remove upload folder", "dir", tmp, "err", err)
		}
	}()
	obj, err := receiveFiles(mr, meta, tmp)
	if err != nil {
		return Version{}, fmt.Errorf("object %s: %w", meta.ARK, err)
	}
	// What Put would refuse (e.g. "a" beside "a/b") is the request's fault;
	// what fails after this is ours. Both errors name the object.
	if _, err := checkObject(obj); err != nil {
		return Version{}, badRequest{err}
	}
	return s.l.Put(r.Context(), obj)
}

// receiveFiles streams the file parts into dir and returns the object with
// each file's Path pointing there.
func receiveFiles(mr *multipart.Reader, meta putRequest, dir string) (Object, error) {
	// File.Path is not in the JSON, so every Path set here is ours: the
	// client cannot point Put at the server's own files.
	obj := Object{ARK: meta.ARK, LocalIDs: meta.LocalIDs, Files: meta.Files, Describing: meta.Describing, Message: meta.Message}
	index, err := checkDeclared(meta)
	if err != nil {
		return obj, err
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return obj, bad("reading the next part: %w", err)
		}
		i, err := fileIndex(p, index)
		if err != nil {
			return obj, err
		}
		f := &obj.Files[i]
		if f.Path != "" {
			return obj, bad("file %q sent twice", f.Name)
		}
		f.Path = filepath.Join(dir, strconv.Itoa(i)) // never the sent name: it is not trusted
		if err := receiveFile(p, *f); err != nil {
			return obj, err
		}
	}
	for _, f := range obj.Files {
		if f.Path == "" {
			return obj, bad("file %q declared but not sent", f.Name)
		}
	}
	return obj, nil
}

// readVersionPart reads the first part, which declares the object.
func readVersionPart(mr *multipart.Reader) (putRequest, error) {
	var meta putRequest
	p, err := mr.NextPart()
	if err != nil {
		return meta, bad("reading the version part: %w", err)
	}
	if p.FormName() != "version" {
		return meta, bad("the first part is %q, not \"version\"", p.FormName())
	}
	b, err := io.ReadAll(io.LimitReader(p, maxVersionPart+1))
	if err != nil {
		return meta, bad("reading the version part: %w", err)
	}
	if len(b) > maxVersionPart {
		return meta, bad("the version part is larger than %d bytes", maxVersionPart)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return meta, bad("the version part: %w", err)
	}
	return meta, nil
}

// checkDeclared rejects a hostile or malformed declaration before any file
// is received, and returns each name's position.
func checkDeclared(meta putRequest) (map[string]int, error) {
	if err := checkARK(meta.ARK); err != nil {
		return nil, badRequest{err}
	}
	if len(meta.Files) == 0 {
		return nil, bad("no files declared")
	}
	index := make(map[string]int, len(meta.Files))
	for i, f := range meta.Files {
		if err := checkName(f.Name); err != nil {
			return nil, badRequest{err}
		}
		if _, dup := index[f.Name]; dup {
			return nil, bad("file %q declared twice", f.Name)
		}
		if f.Size < 0 || !sha256hex.Valid(f.SHA256) {
			return nil, bad("file %q: size %d or sha256 %q is invalid", f.Name, f.Size, f.SHA256)
		}
		index[f.Name] = i
	}
	return index, nil
}

// fileIndex returns the declared position of a file part. The name is read
// from Content-Disposition directly: Part.FileName keeps only the base name,
// and the client sends the object-relative path.
func fileIndex(p *multipart.Part, index map[string]int) (int, error) {
	disp, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil || disp != "form-data" || params["name"] != "file" {
		return 0, bad("a part is not a file: Content-Disposition %q", p.Header.Get("Content-Disposition"))
	}
	name, ok := params["filename"]
	if !ok {
		return 0, bad("a file part has no file name")
	}
	i, ok := index[name]
	if !ok {
		return 0, bad("file %q was not declared in the version part", name)
	}
	return i, nil
}

// receiveFile streams one part to f.Path, reading at most one byte more
// than declared, and checks size and digest.
func receiveFile(body io.Reader, f File) error {
	out, err := os.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("file %q: %w", f.Name, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), requestReader{io.LimitReader(body, f.Size+1)})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("file %q: receiving into %s: %w", f.Name, f.Path, err)
	case n > f.Size:
		return bad("file %q is larger than the declared %d bytes", f.Name, f.Size)
	case n < f.Size:
		return bad("file %q has %d bytes, declared %d", f.Name, n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return bad("file %q has sha256 %s, declared %s", f.Name, got, f.SHA256)
	}
	return nil
}

// requestReader marks read errors as the request's, so a failed write to
// disk (ours) stays apart from a broken upload (theirs).
type requestReader struct{ r io.Reader }

func (q requestReader) Read(p []byte) (int, error) {
	n, err := q.r.Read(p)
	if err != nil && err != io.EOF {
		err = badRequest{err}
	}
	return n, err
}

// object answers the latest version of an object, or every version.
func (s *server) object(w http.ResponseWriter, r *http.Request) {
	ark := r.PathValue("ark")
	if err := checkARK(ark); err != nil {
		s.fail(w, r, badRequest{err})
		return
	}
	var answer any
	var err error
	switch versions := r.URL.Query().Get("versions"); versions {
	case "", "latest":
		answer, err = s.l.Latest(r.Context(), ark) // File.Path is not in the JSON: the store's layout stays private
	case "all":
		var vs []Version
		vs, err = s.l.survey(r.Context(), ark)
		answer = surveyReply{ARK: ark, Versions: vs}
	default:
		err = bad("versions %q: want all, or latest (the default)", versions)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		http.Error(w, fmt.Sprintf("no version of %s", ark), http.StatusNotFound)
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, answer)
	}
}

// content answers the bytes of one file of one version.
func (s *server) content(w http.ResponseWriter, r *http.Request) {
	ark, q := r.PathValue("ark"), r.URL.Query()
	name := q.Get("file")
	n, err := strconv.Atoi(q.Get("version"))
	if aerr := checkARK(ark); aerr != nil {
		err = badRequest{aerr}
	} else if err != nil || n < 1 {
		err = bad("version %q: want a version number, 1 or more", q.Get("version"))
	} else if nerr := checkName(name); nerr != nil {
		err = bad("file: %w", nerr)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	path, err := s.l.StoredFile(ark, n, name)
	var f *os.File
	if err == nil {
		if f, err = os.Open(path); errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("the stored copy of file %q of version %d of %s is gone: %w", name, n, ark, ErrNotFound)
		}
	}
	switch {
	case errors.Is(err, ErrNotFound): // the error names the version or file the object lacks
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// fail answers 400 for the request's fault and 500 otherwise, logging both.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, level := http.StatusInternalServerError, slog.LevelError
	if errors.As(err, new(badRequest)) {
		status, level = http.StatusBadRequest, slog.LevelWarn
	}
	s.log.Log(r.Context(), level, "storage server: request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	http.Error(w, err.Error(), status)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the client sees a cut answer as a bad one
}
