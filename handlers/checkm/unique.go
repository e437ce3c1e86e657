package checkm

import (
	"fmt"
	"strings"

	"github.com/ingestq/ingestq/internal/redact"
)

// uniqueness remembers what earlier entries claimed, so that an entry that
// collides with one names both lines.
type uniqueness struct {
	files   map[string]int // IngestManifest: file name → line
	folders map[string]int // IngestManifest: folder implied by a file name → first line
	objects map[string]int // batch profiles: URL + local ids → line
}

// add records e, or tells which earlier line it collides with.
func (u *uniqueness) add(profile string, e *Entry) error {
	if profile == IngestManifest {
		return u.addFile(e)
	}
	return u.addObject(e)
}

// addFile rejects a second file of the same name, and a file whose name is
// also a folder of another file ("a" and "a/b"): both could not be stored.
func (u *uniqueness) addFile(e *Entry) error {
	if u.files == nil {
		u.files, u.folders = map[string]int{}, map[string]int{}
	}
	name := e.FileName
	if line, dup := u.files[name]; dup {
		return fmt.Errorf("duplicate file name %q (also on line %d)", name, line)
	}
	if line, clash := u.folders[name]; clash {
		return fmt.Errorf("file name %q is also a folder of the file on line %d", name, line)
	}
	for i := strings.LastIndexByte(name, '/'); i > 0; i = strings.LastIndexByte(name[:i], '/') {
		folder := name[:i]
		if line, clash := u.files[folder]; clash {
			return fmt.Errorf("file name %q puts a file inside %q, the file on line %d", name, folder, line)
		}
		if _, seen := u.folders[folder]; seen {
			break // its parents were recorded with it
		}
		u.folders[folder] = e.Line
	}
	u.files[name] = e.Line
	return nil
}

// addObject rejects an object listed twice: the same URL with the same
// local identifiers.
func (u *uniqueness) addObject(e *Entry) error {
	if u.objects == nil {
		u.objects = map[string]int{}
	}
	key := e.URL + "\x00" + strings.Join(e.LocalIDs, ";")
	if line, dup := u.objects[key]; dup {
		return fmt.Errorf("duplicate object: same URL %q and local identifier %q as line %d",
			truncate(redact.Location(e.URL)), strings.Join(e.LocalIDs, ";"), line)
	}
	u.objects[key] = e.Line
	return nil
}
