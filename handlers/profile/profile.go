package profile

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/ingestq/ingestq/internal/redact"
)

// Profile is the configuration of one collection: how its jobs are queued,
// whom to tell when they finish, and how their objects are identified.
type Profile struct {
	Name            string     `yaml:"name" json:"name"`
	Description     string     `yaml:"description" json:"description,omitempty"`
	Priority        int        `yaml:"priority" json:"priority"`
	Callback        string     `yaml:"callback" json:"callback,omitempty"`
	ReportCallback  string     `yaml:"report_callback" json:"report_callback,omitempty"` // each batch report is POSTed here
	Notify          []string   `yaml:"notify" json:"notify,omitempty"`
	NAAN            string     `yaml:"naan" json:"naan"`
	Shoulder        string     `yaml:"shoulder" json:"shoulder"`
	Storage         string     `yaml:"storage" json:"storage,omitempty"`
	Inventory       string     `yaml:"inventory" json:"inventory,omitempty"`
	AllowLocalFiles bool       `yaml:"allow_local_files" json:"allow_local_files,omitempty"`
	LargeJobs       []SizeRule `yaml:"large_jobs" json:"large_jobs,omitempty"`
	Access          string     `yaml:"access" json:"access,omitempty"` // where its access packages go: "", "folder" or s3://…
}

// SizeRule sends big jobs to the back of the queue: a job whose
// space_needed is over Over gets at least Priority (a higher number runs
// later), so one huge deposit does not hold up many small ones.
type SizeRule struct {
	Over     ByteSize `yaml:"over" json:"over"`
	Priority int      `yaml:"priority" json:"priority"`
}

// DefaultPriority is a profile's priority when its file does not set one.
const DefaultPriority = 5

// MaxNameLen bounds a profile name; it is a ZooKeeper node name and appears
// in logs and job records.
const MaxNameLen = 64

var (
	nameRE        = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	naanRE        = regexp.MustCompile(`^[0-9]+$`)
	betanumericRE = regexp.MustCompile(`^[0-9bcdfghjkmnpqrstvwxz]+$`)
)

// Default returns the built-in "demo" profile: the test NAAN 99999 with the
// "fk4" shoulder that ARK resolvers treat as fake, built-in storage and
// inventory, and no local files.
func Default() *Profile {
	return &Profile{
		Name:        "demo",
		Description: "Built-in demonstration profile; its ARKs (99999/fk4...) are not persistent.",
		Priority:    DefaultPriority,
		NAAN:        "99999",
		Shoulder:    "fk4",
	}
}

// Validate reports every invalid field of p, each error naming the field
// by its YAML key.
func (p *Profile) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("field %q: %s", field, fmt.Sprintf(format, args...)))
	}
	if err := ValidName(p.Name); err != nil {
		bad("name", "%v", err)
	}
	if p.Priority < 0 || p.Priority > 99 {
		bad("priority", "%d is outside 0..99", p.Priority)
	}
	if err := checkURL(p.Callback); err != nil {
		bad("callback", "%v", err)
	}
	if err := checkURL(p.ReportCallback); err != nil {
		bad("report_callback", "%v", err)
	}
	for i, a := range p.Notify {
		if _, err := mail.ParseAddress(a); err != nil {
			bad(fmt.Sprintf("notify[%d]", i), "%q is not an e-mail address: %v", a, err)
		}
	}
	if !naanRE.MatchString(p.NAAN) {
		bad("naan", "%q must be digits, e.g. \"99999\"", p.NAAN)
	}
	if !betanumericRE.MatchString(p.Shoulder) {
		bad("shoulder", "%q must be betanumeric (characters of 0123456789bcdfghjkmnpqrstvwxz), e.g. \"fk4\"", p.Shoulder)
	}
	for _, t := range strings.Split(p.Storage, ",") {
		if err := checkURL(strings.TrimSpace(t), "s3", "file"); err != nil {
			bad("storage", "%v", err)
		}
	}
	if err := checkURL(p.Inventory, "postgres", "postgresql"); err != nil {
		bad("inventory", "%v", err)
	}
	if p.Access != "" && p.Access != "folder" && !strings.HasPrefix(p.Access, "s3://") {
		bad("access", "%q: want folder, or an s3://bucket/prefix URL", p.Access)
	}
	seen := map[ByteSize]bool{}
	for i, r := range p.LargeJobs {
		field := fmt.Sprintf("large_jobs[%d]", i)
		if r.Over < 0 {
			bad(field+".over", "%d is negative", r.Over)
		}
		if seen[r.Over] {
			// Two rules with one threshold would make "the largest
			// matching rule" ambiguous.
			bad(field+".over", "%d is used by another rule", r.Over)
		}
		seen[r.Over] = true
		if r.Priority < 0 || r.Priority > 99 {
			bad(field+".priority", "%d is outside 0..99", r.Priority)
		}
	}
	return errors.Join(errs...)
}

// ValidName reports whether name can name a profile: [a-z0-9][a-z0-9_.-]*,
// at most MaxNameLen characters (so it is also a safe ZooKeeper node name).
func ValidName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("%q is longer than %d characters", name, MaxNameLen)
	case !nameRE.MatchString(name):
		return fmt.Errorf("%q must match [a-z0-9][a-z0-9_.-]*", name)
	}
	return nil
}

// checkURL accepts "" (meaning the daemon's default or none), a URL of
// http, https or one of the other schemes given, and where file is one of
// them an absolute path. The back end checks the rest when it opens it.
func checkURL(s string, schemes ...string) error {
	if s == "" || (strings.HasPrefix(s, "/") && slices.Contains(schemes, "file")) {
		return nil
	}
	shown := redact.Location(s)
	u, err := url.Parse(s)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return fmt.Errorf("%q is not a URL: %w", shown, ue.Err) // ue's own text repeats s
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" && !slices.Contains(schemes, scheme) {
		return fmt.Errorf("%q: want an absolute path or a URL of %s", shown, strings.Join(append([]string{"http", "https"}, schemes...), ", "))
	}
	if u.Host == "" && scheme != "file" {
		return fmt.Errorf("%q has no host", shown)
	}
	return nil
}

// PriorityFor returns the priority of a job needing spaceNeeded bytes that
// would otherwise get current. Of the rules whose Over the job exceeds, the
// one with the largest Over applies; the result is never lower than current,
// because a size rule only delays big jobs and must not speed any job up.
func (p *Profile) PriorityFor(spaceNeeded int64, current int) int {
	best := -1
	for i, r := range p.LargeJobs {
		if spaceNeeded > int64(r.Over) && (best < 0 || r.Over > p.LargeJobs[best].Over) {
			best = i
		}
	}
	if best < 0 {
		return current
	}
	return max(current, p.LargeJobs[best].Priority)
}

// clone returns a deep copy, so a Set can hand out profiles without callers
// changing what other callers see.
func (p *Profile) clone() *Profile {
	c := *p
	c.Notify = slices.Clone(p.Notify)
	c.LargeJobs = slices.Clone(p.LargeJobs)
	return &c
}
