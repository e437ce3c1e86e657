package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLocalRejectsHostileNames(t *testing.T) {
	l, dir := newLocal(t)
	good := sampleFiles(t)[0]
	for _, name := range []string{
		"/etc/passwd", "../escape", "producer/../../escape", `producer\a.txt`,
		"producer//a.txt", "./producer/a.txt", "producer/", "version.json", "producer/a\nb", "..",
	} {
		f := good
		f.Name = name
		_, err := l.Put(context.Background(), Object{ARK: testARK, Files: []File{f}})
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("name %q: err = %v, want an error naming it", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, dirName(testARK))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a rejected object left a folder: %v", err)
	}
	for _, ark := range []string{"", "..", `ark:\99999\x`, ".hidden"} {
		if _, err := l.Put(context.Background(), Object{ARK: ark, Files: []File{good}}); err == nil {
			t.Errorf("ARK %q accepted", ark)
		}
	}
}

func TestLocalRejectsDuplicateAndNestedNames(t *testing.T) {
	l, _ := newLocal(t)
	f := sampleFiles(t)[0]
	nested := f
	nested.Name = f.Name + "/inner"
	for _, files := range [][]File{{f, f}, {f, nested}} {
		if _, err := l.Put(context.Background(), Object{ARK: testARK, Files: files}); err == nil || !strings.Contains(err.Error(), strconv.Quote(f.Name)) {
			t.Errorf("files %v: err = %v, want an error naming %q", files, err, f.Name)
		}
	}
}
