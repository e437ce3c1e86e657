package checkm

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCleanName(t *testing.T) {
	good := map[string]string{
		"a.txt":                  "a.txt",
		"./a.txt":                "a.txt",
		"dir//sub/./f":           "dir/sub/f",
		"dir/":                   "dir",
		"..a/b..":                "..a/b..",
		"données/été.txt":        "données/été.txt",
		"ab:c.txt":               "ab:c.txt",
		"with space .txt":        "with space .txt",
		"memo /x.txt":            "memo /x.txt",
		" lead.txt":              " lead.txt",
		"\u3000memo":             "\u3000memo",
		strings.Repeat("n", 255): strings.Repeat("n", 255),
	}
	for in, want := range good {
		got, err := CleanName(in)
		if err != nil || got != want {
			t.Errorf("CleanName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                              "empty",
		"/etc/passwd":                   "absolute",
		"C:\\x":                         "backslash",
		"c:x":                           "drive letter",
		"a:b.txt":                       "drive letter",
		"\\\\server\\share":             "backslash",
		"dir\\file":                     "backslash",
		"a | b.txt":                     "has a |",
		"..":                            `".."`,
		"../x":                          `".."`,
		"a/../b":                        `".."`,
		"a/..":                          `".."`,
		"a\x00b":                        "control character U+0000",
		"a\nb":                          "control character U+000A",
		"a\u0085b":                      "control character U+0085",
		"a\x7fb":                        "control character U+007F",
		"report\u202etxt.exe":           "bidirectional control character U+202E",
		"a\u2066b":                      "bidirectional control character U+2066",
		"\xff\xfe":                      "UTF-8",
		"memo ":                         "ends with white space (U+0020)",
		"memo /":                        "ends with white space (U+0020)",
		"memo\u00a0":                    "ends with white space (U+00A0)",
		"a/memo\u3000":                  "ends with white space (U+3000)",
		".":                             "folder itself",
		"./":                            "folder itself",
		strings.Repeat("n", 256):        "element longer than 255",
		strings.Repeat("d/", 512) + "f": "longer than 1024 bytes",
	}
	for in, want := range bad {
		got, err := CleanName(in)
		if err == nil || !errors.Is(err, ErrUnsafeName) || !strings.Contains(err.Error(), want) {
			t.Errorf("CleanName(%.40q) = %q, %v; want an ErrUnsafeName saying %q", in, got, err, want)
		}
	}
}

// TestCleanFolderName: a folder (a zip's folder entry) may end in white
// space, as its files' names do not; every other rule is CleanName's.
func TestCleanFolderName(t *testing.T) {
	for in, want := range map[string]string{"memo /": "memo ", "a/memo\u00a0/": "a/memo\u00a0", " lead/": " lead", "a/": "a"} {
		if got, err := CleanFolderName(in); err != nil || got != want {
			t.Errorf("CleanFolderName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"../memo /": `".."`, "a\x00 /": "control character", "./": "folder itself"} {
		if got, err := CleanFolderName(in); !errors.Is(err, ErrUnsafeName) || !strings.Contains(err.Error(), want) {
			t.Errorf("CleanFolderName(%q) = %q, %v; want an ErrUnsafeName saying %q", in, got, err, want)
		}
	}
}

// TestCleanNameStaysInside checks the promise callers rely on: a clean name
// is local to the folder and cleaning it again changes nothing.
func TestCleanNameStaysInside(t *testing.T) {
	for _, in := range []string{"a", "a/b/c", "./x/./y/", "x//y", "...", ".../..a"} {
		clean, err := CleanName(in)
		if err != nil {
			t.Fatalf("CleanName(%q): %v", in, err)
		}
		checkCleanName(t, in, clean)
	}
}

func checkCleanName(t *testing.T, in, clean string) {
	t.Helper()
	if !filepath.IsLocal(filepath.FromSlash(clean)) {
		t.Errorf("CleanName(%q) = %q, which is not local", in, clean)
	}
	if again, err := CleanName(clean); err != nil || again != clean {
		t.Errorf("CleanName(%q) = %q, but cleaning that gives %q, %v", in, clean, again, err)
	}
}
