package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadFile reads and validates one profile file. Unknown keys, a second
// YAML document, invalid fields and a name that differs from the file name
// stem are errors; every error names the file.
func LoadFile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p, err := parse(data)
	if err != nil {
		return nil, inFile(path, err)
	}
	errs := []error{p.Validate()}
	stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if p.Name != stem {
		errs = append(errs, fmt.Errorf("field %q: %q differs from the file name stem %q", "name", p.Name, stem))
	}
	if err := inFile(path, errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// inFile prefixes each of errs (flattening errors.Join) with the file, so
// every line of a multi-line report says where it comes from.
func inFile(path string, errs ...error) error {
	var out []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			out = append(out, inFile(path, j.Unwrap()...))
			continue
		}
		out = append(out, fmt.Errorf("profile %s: %w", path, err))
	}
	return errors.Join(out...)
}

// unknownKeyRE matches yaml.v3's report of a key that no field takes.
var unknownKeyRE = regexp.MustCompile(`^line (\d+): field (.*) not found in type \S+$`)

// parse decodes one strict YAML document over the defaults.
func parse(data []byte) (*Profile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	p := &Profile{Priority: DefaultPriority} // keys left out keep these values
	if err := dec.Decode(p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file")
		}
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, err
		}
		// One error per problem, with yaml.v3's wording for unknown keys
		// put in the operator's terms.
		errs := make([]error, len(te.Errors))
		for i, msg := range te.Errors {
			if m := unknownKeyRE.FindStringSubmatch(msg); m != nil {
				msg = fmt.Sprintf("line %s: unknown key %q", m[1], m[2])
			}
			errs[i] = errors.New(msg)
		}
		return nil, errors.Join(errs...)
	}
	if len(p.Notify) == 0 {
		p.Notify = nil // "notify: []" and no key mean the same
	}
	if len(p.LargeJobs) == 0 {
		p.LargeJobs = nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document (only one profile per file)")
	}
	return p, nil
}

// Set is a validated collection of profiles with distinct names. It is
// read-only after construction and safe for concurrent use.
type Set struct {
	byName map[string]*Profile
	names  []string // sorted
}

// NewSet checks each profile and that no name is used twice.
func NewSet(profiles ...*Profile) (*Set, error) {
	s := &Set{byName: make(map[string]*Profile, len(profiles))}
	for _, p := range profiles {
		if p == nil {
			return nil, errors.New("profile: nil profile")
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("profile %q: %w", p.Name, err)
		}
		if _, dup := s.byName[p.Name]; dup {
			return nil, fmt.Errorf("profile %q: defined twice", p.Name)
		}
		s.byName[p.Name] = p.clone()
		s.names = append(s.names, p.Name)
	}
	slices.Sort(s.names)
	return s, nil
}

// LoadDir loads every *.yml and *.yaml file directly in dir (not in its
// subdirectories; names starting with "." are skipped as editor or backup
// files). Every bad file is reported, each error naming its file. A
// directory without profiles gives an empty Set.
func LoadDir(dir string) (*Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	s := &Set{byName: map[string]*Profile{}}
	from := map[string]string{} // profile name → file, to name both of a pair
	var errs []error
	for _, e := range entries {
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if e.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yml" && ext != ".yaml") {
			continue
		}
		path := filepath.Join(dir, name)
		p, err := LoadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := from[p.Name]; dup {
			errs = append(errs, fmt.Errorf("profile %s: name %q is also defined by %s", path, p.Name, other))
			continue
		}
		from[p.Name] = path
		s.byName[p.Name] = p
		s.names = append(s.names, p.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(s.names)
	return s, nil
}

// Get returns a copy of the named profile.
func (s *Set) Get(name string) (*Profile, bool) {
	p, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return p.clone(), true
}

// Names returns the profile names in sorted order.
func (s *Set) Names() []string { return slices.Clone(s.names) }
