// Package deploy holds what an operator installs beside the binary; its test
// checks the Prometheus alerting rules with promtool.
package deploy

import (
	"os/exec"
	"strings"
	"testing"
)

const promtoolHint = "install it with:\n\t./scripts/install-prometheus.sh   (apt-get install -y prometheus; or: make deps)"

// promtool checks ingestq-alerts.yml (syntax, templates, labels) and runs
// its unit tests, ingestq-alerts_test.yml: each alert fires on the series
// it is for, and not on a healthy idle cluster's or the near misses'.
func TestAlertingRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed: %v; %s", err, promtoolHint)
	}
	for _, args := range [][]string{
		{"check", "rules", "ingestq-alerts.yml"},
		{"test", "rules", "ingestq-alerts_test.yml"},
	} {
		out, err := exec.CommandContext(t.Context(), promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
