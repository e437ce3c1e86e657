package handlers

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Provisioning's view of a file system is df's: its total is what is used
// plus what is free for an unprivileged user, so a file system with blocks
// reserved for root is as full as df says, not fuller.
func TestDiskSpaceIsDfs(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("df", "-B1", "--output=used,avail", dir).Output()
	if err != nil {
		t.Fatalf("df (coreutils) on %s: %v", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	used, _ := strconv.ParseUint(f[0], 10, 64)
	avail, _ := strconv.ParseUint(f[1], 10, 64)
	free, total, err := DiskSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Other programs write meanwhile: allow 64 MiB of drift.
	const drift = 64 << 20
	near := func(a, b uint64) bool { return max(a, b)-min(a, b) <= drift }
	if !near(free, avail) || !near(total, used+avail) {
		t.Errorf("DiskSpace(%s) = free %d, total %d; df says used %d, available %d (total %d)", dir, free, total, used, avail, used+avail)
	}
}
