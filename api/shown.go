package api

import (
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor/queue"
)

// Shown is a depositor's or a configured URL (a payload or manifest URL,
// a node's manifest_url with its hand-off key, a callback) as the caller
// is shown it: whole to an admin token, to any other (anonymous reads and
// scoped tokens too) with its passwords, tokens, signatures and keys
// masked by redact.URLs, and a value that is no URL (a title, a local id,
// a file name, whatever "=" it holds) as written. It is the one rule of
// every door below admin: the API's answers and the dashboard's pages.
// The server's paths are hidden after it, in the answer as written
// (pathHider, the dashboard's hidePaths), so a masked URL is still hidden
// when it is a file: URL.
func (c Caller) Shown(location string) string {
	if c.Role >= RoleAdmin {
		return location
	}
	return redact.URLs(location)
}

// shownRecord is a record's JSON object (a job's configuration, a batch's
// submission) as caller is shown it: each string in it through Shown, not
// payload_url alone, as another program's keys (Merritt's) may hold a URL
// too; redact.URLs keeps a value with no secret as written. m is
// changed in place: it is the answer's own copy (Map).
func shownRecord(m map[string]any, caller Caller) map[string]any {
	for k, v := range m {
		m[k] = shownValue(v, caller)
	}
	return m
}

// shownValue is a JSON value with each string in it through Shown.
func shownValue(v any, caller Caller) any {
	switch x := v.(type) {
	case string:
		return caller.Shown(x)
	case map[string]any:
		return shownRecord(x, caller)
	case []any:
		for i := range x {
			x[i] = shownValue(x[i], caller)
		}
	}
	return v
}

// shownManifest is a job's store or inventory node as caller is shown it:
// its manifest_url carries the key that reads the job's hand-off (the
// deposit's files, handlers.Handoff), which a token below admin is shown
// masked (Shown).
func shownManifest(m *queue.StepManifest, caller Caller) *queue.StepManifest {
	if m == nil {
		return nil
	}
	shown := *m
	shown.ManifestURL = caller.Shown(m.ManifestURL)
	return &shown
}
