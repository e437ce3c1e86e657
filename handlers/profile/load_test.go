package profile

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const testdata = "../../testdata/profiles"

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDemoFileIsDefault(t *testing.T) {
	p, err := LoadFile(filepath.Join(testdata, "demo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(); !reflect.DeepEqual(p, want) {
		t.Errorf("demo.yml = %+v\nDefault() = %+v", p, want)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default() is invalid: %v", err)
	}
}

func TestLoadFileBad(t *testing.T) {
	tests := []struct {
		file string
		want []string // substrings of the error besides the file's path
	}{
		{"unknown-key.yml", []string{"line 4", `unknown key "priorty"`}},
		{"bad-naan.yml", []string{`"naan"`, "99a99"}},
		{"bad-email.yml", []string{`"notify[1]"`, "not an address"}},
		{"bad-priority.yml", []string{`"priority"`, "100", "0..99"}},
		{"wrong-name.yml", []string{`"name"`, "another-name", "wrong-name"}},
		{"bad-shoulder.yml", []string{`"shoulder"`, "fka4"}},
		{"bad-size.yml", []string{"line 5", "XB"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(testdata, "bad", tt.file)
			p, err := LoadFile(path)
			if err == nil {
				t.Fatalf("LoadFile(%s) = %+v, want an error", path, p)
			}
			for _, w := range append([]string{path}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadFileReportsEveryBadField(t *testing.T) {
	path := writeFile(t, t.TempDir(), "many.yml", `name: many
priority: -1
naan: x
shoulder: ""
callback: ftp://example.org/x
storage: "http://"
`)
	_, err := LoadFile(path)
	if err == nil {
		t.Fatal("no error")
	}
	for _, field := range []string{"priority", "naan", "shoulder", "callback", "storage"} {
		if !strings.Contains(err.Error(), `"`+field+`"`) {
			t.Errorf("error %q does not name field %s", err, field)
		}
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.Contains(line, path) {
			t.Errorf("error line %q does not name the file", line)
		}
	}
}

func TestLoadFilePriorityDefault(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		extra string
		want  int
	}{
		{"", DefaultPriority},
		{"priority: 0\n", 0},
		{"priority: 99\n", 99},
	}
	for _, tt := range tests {
		p, err := LoadFile(writeFile(t, dir, "p.yml", "name: p\nnaan: \"12345\"\nshoulder: b2\n"+tt.extra))
		if err != nil {
			t.Fatalf("%q: %v", tt.extra, err)
		}
		if p.Priority != tt.want {
			t.Errorf("%q: priority %d, want %d", tt.extra, p.Priority, tt.want)
		}
	}
}

func TestLoadFileMalformed(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]string{
		"empty.yml":  "",
		"twice.yml":  "name: twice\nnaan: \"1\"\nshoulder: b\n---\nname: twice\n",
		"list.yml":   "- name: list\n",
		"broken.yml": "name: [unclosed\n",
	}
	for file, text := range tests {
		path := writeFile(t, dir, file, text)
		if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v does not name the file", file, err)
		}
	}
	missing := filepath.Join(dir, "missing.yml")
	if _, err := LoadFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: error %v does not name the file", err)
	}
}

func TestLoadDir(t *testing.T) {
	s, err := LoadDir(testdata) // bad/ is a subdirectory and is not read
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); !slices.Equal(got, []string{"demo"}) {
		t.Errorf("Names() = %v, want [demo]", got)
	}

	dir := t.TempDir()
	writeFile(t, dir, "zeta.yaml", "name: zeta\nnaan: \"13030\"\nshoulder: m5\npriority: 7\n")
	writeFile(t, dir, "alpha.yml", "name: alpha\nnaan: \"13030\"\nshoulder: c3\n")
	writeFile(t, dir, ".#alpha.yml", "editor lock file, not YAML: [")
	writeFile(t, dir, "README.txt", "not a profile")
	s, err = LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); !slices.Equal(got, []string{"alpha", "zeta"}) {
		t.Errorf("Names() = %v, want [alpha zeta]", got)
	}
	if p, ok := s.Get("zeta"); !ok || p.Priority != 7 || p.Shoulder != "m5" {
		t.Errorf("Get(zeta) = %+v, %v", p, ok)
	}
	if p, ok := s.Get("nope"); ok || p != nil {
		t.Errorf("Get(nope) = %+v, %v", p, ok)
	}
}

func TestLoadDirNamesEveryBadFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "good.yml", "name: good\nnaan: \"1\"\nshoulder: b\n")
	bad1 := writeFile(t, dir, "one.yml", "name: one\nnaan: \"1\"\nshoulder: b\ncolour: red\n")
	bad2 := writeFile(t, dir, "two.yml", "name: two\nnaan: \"\"\nshoulder: b\n")
	_, err := LoadDir(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{bad1, "colour", bad2, `"naan"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "good.yml") {
		t.Errorf("error %q blames the good file", err)
	}
}

func TestLoadDirDuplicateName(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "same.yml", "name: same\nnaan: \"1\"\nshoulder: b\n")
	b := writeFile(t, dir, "same.yaml", "name: same\nnaan: \"2\"\nshoulder: b\n")
	_, err := LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Errorf("error %v does not name both %s and %s", err, a, b)
	}
	if _, err := LoadDir(filepath.Join(dir, "absent")); err == nil {
		t.Error("LoadDir of a missing directory: no error")
	}
}

func TestSetHandsOutCopies(t *testing.T) {
	s, err := NewSet(Default())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Get("demo")
	p.Priority = 42
	p.Notify = append(p.Notify, "x@example.org")
	again, _ := s.Get("demo")
	if !reflect.DeepEqual(again, Default()) {
		t.Errorf("a caller's change leaked into the set: %+v", again)
	}
	names := s.Names()
	names[0] = "changed"
	if s.Names()[0] != "demo" {
		t.Error("Names() exposes the set's slice")
	}
}

func TestNewSetRejects(t *testing.T) {
	bad := Default()
	bad.NAAN = "nine"
	if _, err := NewSet(bad); err == nil || !strings.Contains(err.Error(), `"naan"`) {
		t.Errorf("invalid profile: error %v does not name the field", err)
	}
	if _, err := NewSet(Default(), Default()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: error %v", err)
	}
	if _, err := NewSet(nil); err == nil {
		t.Error("nil profile: no error")
	}
}
