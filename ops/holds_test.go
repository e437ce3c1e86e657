package ops

import (
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A queue hold is ingestq's by its node's name, not by the CLI's aliases:
// another program's hold named access-small was given `ingestq release
// queue` (the map of the CLI's words had no access-small: the ingest
// queue's release) and DELETE /api/v1/holds/queues/access-small, which
// lifts ingestq's accessSmall hold instead.
func TestQueueHoldNamedAsAnAliasIsAnotherProgramsToRelease(t *testing.T) {
	for d, door := range map[Door]string{CLI: "the CLI", HTTP: "the API", Dashboard: "the dashboard"} {
		if got := ReleaseOf("queue", "access-small", d); !strings.HasPrefix(got, "by the program that set it") {
			t.Errorf("%s: a foreign hold named access-small is released %q; want by the program that set it", door, got)
		}
	}
	if got := ReleaseOf("queue", queue.QueueAccessSmall, CLI); got != "ingestq release queue access-small" {
		t.Errorf("ingestq's own %s hold is released %q; want ingestq release queue access-small", queue.QueueAccessSmall, got)
	}
}
