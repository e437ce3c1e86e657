// Package ocfltest runs an independent OCFL implementation on storage
// roots in tests: scripts/ocfl-validate, which reads every object, version
// and file through the npm package @ocfl/ocfl-fs and checks the rules of
// the specification that package leaves out.
package ocfltest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const install = "scripts/install-ocfl-validator.sh (node, npm and the pinned @ocfl/ocfl-fs)"

// Validate fails t, with the validator's report, unless dir is a valid
// OCFL storage root whose every file reads back with its digest.
func Validate(t testing.TB, dir string) {
	t.Helper()
	if out, ok := Run(t, dir); !ok {
		t.Fatalf("OCFL validator: %s is not valid:\n%s", dir, out)
	}
}

// Run runs the validator on dir and returns its report and whether dir is
// valid. A validator that cannot run fails t with the install command.
func Run(t testing.TB, dir string) (string, bool) {
	t.Helper()
	script := filepath.Join(repoRoot(t), "scripts", "ocfl-validate", "validate.js")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("OCFL validator: node is missing; run %s", install)
	}
	lib := filepath.Join(filepath.Dir(script), "node_modules", "@ocfl", "ocfl-fs", "index.js")
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("OCFL validator: @ocfl/ocfl-fs is not installed (%v); run %s", err, install)
	}
	out, err := exec.Command(node, script, dir).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), true
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return string(out), false
	}
	t.Fatalf("OCFL validator could not run on %s: %v\n%s", dir, err, out)
	return "", false
}

// repoRoot is the folder holding go.mod, above the test's folder.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("OCFL validator: no go.mod above the test's folder")
		}
		dir = parent
	}
}
