package api

import (
	"net/http"
	"strings"

	"github.com/ingestq/ingestq/internal/serverpath"
)

// A token below admin sees no path of the server's file systems: working
// folders, storage roots, data folders, a file: payload, nor one named in
// a message (package serverpath). Only an admin token sees them; the
// API's own paths (/api/v1/…) stay.

// pathHider writes what it is given with its paths hidden. Each write is
// a whole answer or a whole event, so that no path is cut in two. root is
// the queue's ZooKeeper root, whose nodes are shown.
type pathHider struct {
	http.ResponseWriter
	root string
}

func (h pathHider) Write(p []byte) (int, error) {
	if _, err := h.ResponseWriter.Write(serverpath.Hide(p, h.root, strings.TrimSuffix(Prefix, "/"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush lets the event stream flush through it.
func (h pathHider) Flush() { http.NewResponseController(h.ResponseWriter).Flush() }

func (h pathHider) Unwrap() http.ResponseWriter { return h.ResponseWriter }
