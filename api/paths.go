package api

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// A token below admin sees no path of the server's file systems: working
// folders, storage roots, data folders, a file: payload, nor one named in
// a message. Only an admin token sees them.

// hiddenPath stands for a path hidden.
const hiddenPath = "[server path hidden]"

// localPath matches an absolute path, or a file: URL, that starts a word
// of text: after a space, a quote, a bracket, = , or ;, up to the end of
// the word (a colon or full stop after it is the sentence's). A URL's
// path (https://host/…) and an ARK's (ark:/…) follow no such character.
var localPath = regexp.MustCompile(`(^|[\s"'(\[=,;])((?:file:)?/[^\s"'\\()\[\],;]*[^\s"'\\()\[\],;:.])`)

// hidePaths replaces each local path in text (an answer's JSON, or an
// event of the stream) by hiddenPath; the API's own paths stay.
func hidePaths(text []byte) []byte {
	return localPath.ReplaceAllFunc(text, func(m []byte) []byte {
		sub := localPath.FindSubmatch(m)
		if strings.HasPrefix(string(sub[2]), strings.TrimSuffix(Prefix, "/")) {
			return m
		}
		return slices.Concat(sub[1], []byte(hiddenPath))
	})
}

// pathHider writes what it is given with its paths hidden. Each write is
// a whole answer or a whole event, so that no path is cut in two.
type pathHider struct{ http.ResponseWriter }

func (h pathHider) Write(p []byte) (int, error) {
	if _, err := h.ResponseWriter.Write(hidePaths(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush lets the event stream flush through it.
func (h pathHider) Flush() { http.NewResponseController(h.ResponseWriter).Flush() }

func (h pathHider) Unwrap() http.ResponseWriter { return h.ResponseWriter }
