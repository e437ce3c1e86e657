package access

import (
	"mime"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ingestq/ingestq/handlers/internal/plainfile"
)

// Handler serves the folder's published packages, read-only, at
// Prefix<name> (Range requests work); partial files and anything not
// shaped as a package's name (isPackage) get 404. The names hold their
// request's token, which no one can guess: the server needs no
// authentication for them. A package whose request was deleted or whose
// expiry has passed is 410 Gone, saying which and when: its request is
// read (gone) at each download, which is refused (503) while ZooKeeper
// cannot tell.
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
		gone, err := as.gone(r.Context(), name)
		switch {
		case err != nil:
			as.log.Warn("access: cannot tell whether a package's request still stands; not served", "name", name, "err", err)
			w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
			http.Error(w, "package "+name+": cannot tell now whether its access request still stands (ZooKeeper does not answer, or a request cannot be read); try again", http.StatusServiceUnavailable)
			return
		case gone != "":
			http.Error(w, gone, http.StatusGone)
			return
		}
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
		http.ServeContent(w, r, name, st.ModTime(), f)
	})
}
