// Package serverpath hides the paths of the server's file systems from
// callers below admin: the API's answers and events, and the dashboard's
// pages, by one rule.
package serverpath

import (
	"regexp"
	"slices"
	"strings"
)

// Hidden stands for a path hidden.
const Hidden = "[server path hidden]"

// localPath matches an absolute path, or a file: URL, that starts a word
// of text: after a space, a quote, a bracket, = , or ;, up to the end of
// the word (a colon or full stop after it is the sentence's). A URL's
// path (https://host/…) and an ARK's (ark:/…) follow no such character.
var localPath = regexp.MustCompile(`(^|[\s"'(\[=,;])((?:file:)?/[^\s"'\\()\[\],;]*[^\s"'\\()\[\],;:.])`)

// queueNode matches the path of a queue's folder (/batches, /jobs,
// /jobs/states/pending, /access/small, /locks/queue …), of a job, batch
// or access request's node, or of one of its children, which a message
// names under the queue's root (a corrupt status, a ref without a job, a
// folder ZooKeeper out of reach did not list): ZooKeeper's, not the
// server's file systems, and what tells a reader which job is broken.
// Exact, as a working area at /jobs holds /jobs/jid…/producer/… on the
// server.
var queueNode = regexp.MustCompile(`^/(jobs(/jid\d+(/[a-z_-]+)?|/states(/[a-z-]+(/[\w-]+)?)?)?|` +
	`batches(/bid\d+(/[a-z_-]+(/[\w-]+){0,2})?)?|batch-uuids(/[^/]+)?|` +
	`access(/(small|large)(/qid\d+(/[a-z_-]+)?)?)?|locks(/[a-z]+)?|ingestq/(hosts|routes|forgotten)(/[\w.-]+)?)$`)

// Hide replaces each local path in text by Hidden, but for the queue's
// nodes, under its root (root: "" for none, or --zk-root's /ingestq) or
// as the queue names them (/batches), and the paths that start with one
// of keep: the server's own (/api/v1, /ui/).
func Hide(text []byte, root string, keep ...string) []byte {
	return localPath.ReplaceAllFunc(text, func(m []byte) []byte {
		sub := localPath.FindSubmatch(m)
		if isQueueNode(string(sub[2]), root) || slices.ContainsFunc(keep, func(k string) bool { return strings.HasPrefix(string(sub[2]), k) }) {
			return m
		}
		return slices.Concat(sub[1], []byte(Hidden))
	})
}

// isQueueNode tells whether p is a queue's node (queueNode), or its root.
func isQueueNode(p, root string) bool {
	if root != "" {
		if p == root {
			return true
		}
		if rel, ok := strings.CutPrefix(p, root); ok && strings.HasPrefix(rel, "/") {
			p = rel
		}
	}
	return queueNode.MatchString(p)
}
