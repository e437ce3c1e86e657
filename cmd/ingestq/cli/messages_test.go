package cli_test

import (
	"slices"
	"strings"
	"testing"
)

// --nats shows one default, whatever INGESTQ_NATS says; serve --help says
// where objects are stored (<data-dir>/ocfl, as the pipeline does).
func TestHelpSaysOneDefaultAndTheStoragePlace(t *testing.T) {
	t.Parallel()
	out, _, code := runEnv(t, map[string]string{"INGESTQ_NATS": "nats://127.0.0.1:24222"}, "ls", "--help")
	wantCode(t, code, 0)
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "--nats string") {
			line = l
		}
	}
	if strings.Count(line, "default") != 1 || strings.Contains(line, "24222") {
		t.Errorf("--nats help %q: want one default, not the variable's value as a second", line)
	}
	out, _, code = runEnv(t, nil, "serve", "--help")
	wantCode(t, code, 0)
	if !strings.Contains(out, "--data-dir/ocfl") || strings.Contains(out, "--data-dir/storage") {
		t.Errorf("serve --help does not say objects go to --data-dir/ocfl:\n%s", out)
	}
}

// A command's own log lines carry the same full timestamp as the daemon's.
func TestCommandLogTimestamps(t *testing.T) {
	t.Parallel()
	_, stderr, code := runEnv(t, nil, slices.Concat(nowhere, []string{"--log-level", "debug", "object", "ark:/99999/fk4x",
		"--api", "http://" + closedAddr(t) + "/api/v1"})...)
	wantCode(t, code, 1)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "asking the daemon's API for objects") {
		t.Fatalf("stderr %q: want a debug line, then the error", stderr)
	}
	wantTimestamp(t, lines[0])
}
