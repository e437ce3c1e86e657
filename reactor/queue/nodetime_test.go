package queue_test

import (
	"testing"
	"time"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A node's time is given in JSON as RFC 3339 in UTC, whichever of the two
// layouts it was kept in; what does not parse is given as written.
func TestJSONTime(t *testing.T) {
	for in, want := range map[string]string{
		"2024-03-01 09:30:15 -0700":    "2024-03-01T16:30:15Z", // Merritt's layout, in its writer's zone
		"2024-03-01T09:30:15.25+02:00": "2024-03-01T07:30:15Z", // an access token's RFC 3339
		"2024-03-01T09:30:15Z":         "2024-03-01T09:30:15Z",
		"yesterday":                    "yesterday",
		"":                             "",
		"2024-03-01 09:30:15":          "2024-03-01 09:30:15", // no zone: not guessed
	} {
		if got := queue.JSONTime(in); got != want {
			t.Errorf("JSONTime(%q) = %q, want %q", in, got, want)
		}
	}
}

// NodeText words a node's time as text does (local, to the second), and
// gives what does not parse as written.
func TestNodeText(t *testing.T) {
	local := time.Date(2024, 3, 1, 16, 30, 15, 0, time.UTC).Local().Format(time.DateTime)
	for in, want := range map[string]string{
		"2024-03-01 09:30:15 -0700": local,
		"2024-03-01T16:30:15Z":      local,
		"yesterday":                 "yesterday",
		"":                          "",
	} {
		if got := queue.NodeText(in); got != want {
			t.Errorf("NodeText(%q) = %q, want %q", in, got, want)
		}
	}
}
