package place

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// Fits holds an S3 key, prefix and all, to AWS's 1,024 bytes, and a local
// key's file to PATH_MAX (with the temporary file written beside it
// first) and each of its names to NAME_MAX: a byte over is refused,
// saying by how much.
func TestFitsLimits(t *testing.T) {
	dir := filepath.Join("/", strings.Repeat("d", 200), strings.Repeat("e", 100)) // 303 bytes
	local := &Local{dir: dir, names: nameMax}
	// keyOf is a key whose path under dir is n bytes, ending in a name of
	// last bytes, its folders' names of 200 bytes or less.
	keyOf := func(n, last int) string {
		key := strings.Repeat("x", last)
		for room := n - len(dir) - 1 - last; room > 0; {
			f := min(200, room-1) // the name and its "/"
			key = strings.Repeat("f", f) + "/" + key
			room -= f + 1
		}
		return key
	}
	cases := []struct {
		name   string
		place  Place
		key    string
		over   int    // 0: fits
		what   string // of the refusal
		length int
	}{
		{"S3 key of 1,024 bytes with its prefix", &S3{prefix: "pre/"}, strings.Repeat("k", 1020), 0, "", 0},
		{"S3 key one byte over", &S3{prefix: "pre/"}, strings.Repeat("k", 1021), 1, "its S3 key", 1025},
		{"S3 key of 1,024 bytes, no prefix", &S3{}, strings.Repeat("k/", 511) + "kk", 0, "", 0},
		{"local path of 4,095 bytes", local, keyOf(4095, 100), 0, "", 0},
		{"local path one byte over", local, keyOf(4096, 100), 1, "its path", 4096},
		{"local file whose temporary file's path is over", local, keyOf(4095-maxTempName+2, 1), 1, "its path", 4096},
		{"local name of 255 bytes", local, "a/" + strings.Repeat("n", 255), 0, "", 0},
		{"local name of 256 bytes", local, "a/" + strings.Repeat("n", 256) + "/b", 1, "a name in its path", 256},
	}
	for _, c := range cases {
		err := c.place.Fits(c.key)
		var tl *TooLong
		switch {
		case c.over == 0 && err != nil:
			t.Errorf("%s: %v, want it to fit", c.name, err)
		case c.over == 0:
		case !errors.As(err, &tl):
			t.Errorf("%s: %v, want a *TooLong", c.name, err)
		case tl.Over() != c.over || tl.Length != c.length || !strings.HasPrefix(err.Error(), c.what):
			t.Errorf("%s: %v (%+v), want %s of %d bytes, %d over", c.name, err, tl, c.what, c.length, c.over)
		}
	}
}

// If the file system cannot be asked, or says nothing, a name is held to
// NAME_MAX; a file system of NAME_MAX names is asked (tmpfs or ext4, as
// the test's temporary folder is on).
func TestFitsNameMaxWhenTheFileSystemSaysNone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if got := namesIn(dir); got != nameMax {
		n, err := namelen(dir)
		t.Errorf("the test's folder, whose file system says %d (%v): %+v, want NAME_MAX", n, err, got)
	}
	if got := namesIn(dir + "/missing"); got != nameMax {
		t.Errorf("a folder that cannot be asked: %+v, want NAME_MAX", got)
	}
}

// A place whose file system says names of 100 bytes refuses a name of 101,
// naming that limit and whence it comes; one of 100 fits. (A file system of
// shorter names than 255 cannot be mounted on every machine CI runs on, so
// the limit is given here as namesIn would make it.)
func TestFitsAFileSystemsOwnNameLimit(t *testing.T) {
	t.Parallel()
	local := &Local{dir: t.TempDir(), names: nameLimit{100,
		"a file or folder name is at most 100 bytes on the file system of the place's folder (its statfs f_namelen)"}}
	if err := local.Fits("a/" + strings.Repeat("n", 100)); err != nil {
		t.Errorf("a name of 100 bytes: %v, want it to fit", err)
	}
	err := local.Fits("a/" + strings.Repeat("n", 101) + "/b")
	var tl *TooLong
	if !errors.As(err, &tl) || tl.Length != 101 || tl.Limit != 100 ||
		!strings.Contains(err.Error(), "at most 100 bytes on the file system of the place's folder") {
		t.Errorf("a name of 101 bytes on a file system of 100: %v, want it refused, 1 over the file system's limit", err)
	}
}
