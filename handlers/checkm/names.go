package checkm

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	maxNameBytes    = 1024
	maxElementBytes = 255
)

// CleanName validates a depositor-given file name as a relative path inside
// an object and returns its path.Clean form. It rejects names that are
// empty, absolute ("/x", "C:\x", "C:x", "\\x"), have any ".." element, a
// backslash, a "|", a NUL or other control character, a bidirectional control
// character (U+202E and the like), are not valid UTF-8 (they
// become storage keys), are longer than 1024 bytes or have an element
// longer than 255 bytes, clean to the folder itself ("." or "./"), or
// end with white space.
// Every error wraps ErrUnsafeName; it does not quote the name, so callers
// can say where it came from.
func CleanName(name string) (string, error) {
	clean, err := CleanFolderName(name)
	if err != nil {
		return "", err
	}
	// The storage manifest gives a file's name (producer/…) as its line's
	// last field, and a checkm line is read trimmed, so "memo " would be
	// stored as "memo": refused, not renamed. White space at the start, or
	// ending a folder ("memo /x.txt"), is inside the field and kept.
	if last, _ := utf8.DecodeLastRuneInString(clean); unicode.IsSpace(last) {
		return "", unsafeName("ends with white space (%U), which a checkm manifest drops: it would be stored under another name", last)
	}
	return clean, nil
}

// CleanFolderName is CleanName for the name of a folder (a zip's folder
// entry, "memo /"): a folder may end in white space, since no manifest line
// ends with a folder's name.
func CleanFolderName(name string) (string, error) {
	switch {
	case name == "":
		return "", unsafeName("empty")
	case len(name) > maxNameBytes:
		return "", unsafeName("longer than %d bytes", maxNameBytes)
	case !utf8.ValidString(name):
		return "", unsafeName("not valid UTF-8")
	case strings.ContainsRune(name, '\\'):
		return "", unsafeName("has a backslash")
	case strings.ContainsRune(name, '|'):
		// The storage manifest and the object's manifest list every file by
		// name; refused here, not after the object is unpacked and processed.
		return "", unsafeName("has a |, the field separator of the checkm manifests that list the object's files")
	case strings.HasPrefix(name, "/"):
		return "", unsafeName("absolute")
	case hasDriveLetter(name):
		return "", unsafeName("absolute (starts with a drive letter)")
	}
	for _, r := range name {
		switch {
		case unicode.IsControl(r):
			return "", unsafeName("has control character %U", r)
		case unicode.Is(unicode.Bidi_Control, r): // "a\u202etxt.exe" shows as "aexe.txt"
			return "", unsafeName("has bidirectional control character %U, which shows the name in another order", r)
		}
	}
	for elem := range strings.SplitSeq(name, "/") {
		if elem == ".." {
			return "", unsafeName("a \"..\" element leaves the folder")
		}
		if len(elem) > maxElementBytes {
			return "", unsafeName("has an element longer than %d bytes", maxElementBytes)
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", unsafeName("names the folder itself")
	}
	return clean, nil
}

func unsafeName(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsafeName}, args...)...)
}

// hasDriveLetter reports a Windows drive prefix such as "C:".
func hasDriveLetter(name string) bool {
	return len(name) >= 2 && name[1] == ':' &&
		('a' <= name[0] && name[0] <= 'z' || 'A' <= name[0] && name[0] <= 'Z')
}
