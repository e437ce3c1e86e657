package access

import (
	"mime"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/ingestq/ingestq/handlers/internal/plainfile"
)

// Handler serves the folder's published packages, read-only, at
// Prefix<name> (Range requests work); partial files and anything not
// shaped as a package's name (isPackage) get 404. The names hold their
// request's token, which no one can guess: the server needs no
// authentication for them.
func (as *Assembler) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if !isPackage(name) {
			http.NotFound(w, r)
			return
		}
		f, st, err := plainfile.Open(filepath.Join(as.cfg.Dir, name))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
		http.ServeContent(w, r, name, st.ModTime(), f)
	})
}
