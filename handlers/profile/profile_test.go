package profile

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestByteSizeYAML(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
	}{
		{"1024", 1024},
		{"0", 0},
		{`"10MB"`, 10_000_000},
		{`"1.5GiB"`, 1_610_612_736},
		{`"2 GB"`, 2_000_000_000},
		{`"1.1GB"`, 1_100_000_000}, // exact, not 1099999999
		{`"3kib"`, 3072},
		{`"512 B"`, 512},
		{`"2TiB"`, 2 << 40},
		{`"1.5"`, 1}, // a fraction of a byte is dropped
	}
	for _, tt := range tests {
		var r SizeRule
		if err := yaml.Unmarshal([]byte("over: "+tt.in), &r); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if r.Over != tt.want {
			t.Errorf("%s = %d, want %d", tt.in, r.Over, tt.want)
		}
	}
}

func TestByteSizeYAMLBad(t *testing.T) {
	for _, in := range []string{`"-5"`, `"10 XB"`, `"MB"`, `"1e6"`, `"1.2.3GB"`, `"9999999PiB"`, `[1, 2]`, `{a: 1}`} {
		var r SizeRule
		err := yaml.Unmarshal([]byte("over: "+in), &r)
		if err == nil {
			t.Errorf("%s: accepted as %d", in, r.Over)
			continue
		}
		if !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: error %q has no line", in, err)
		}
	}
}

func TestPriorityFor(t *testing.T) {
	p := Default()
	p.LargeJobs = []SizeRule{
		{Over: 100 << 30, Priority: 30},
		{Over: 1 << 30, Priority: 10},
		{Over: 10 << 30, Priority: 3}, // a bigger threshold with a smaller number
	}
	tests := []struct {
		space   int64
		current int
		want    int
	}{
		{0, 5, 5},           // no rule matches
		{1 << 30, 5, 5},     // "over" is strict
		{1<<30 + 1, 5, 10},  // 1 GiB rule
		{1<<30 + 1, 50, 50}, // never lowers the number
		{20 << 30, 5, 5},    // 10 GiB rule wins over 1 GiB, and 3 < 5
		{20 << 30, 1, 3},    // 10 GiB rule raises 1 to 3
		{200 << 30, 5, 30},  // 100 GiB rule
		{200 << 30, 99, 99}, // already last
		{-1, 5, 5},          // unknown size
	}
	for _, tt := range tests {
		if got := p.PriorityFor(tt.space, tt.current); got != tt.want {
			t.Errorf("PriorityFor(%d, %d) = %d, want %d", tt.space, tt.current, got, tt.want)
		}
	}
	if got := Default().PriorityFor(1<<50, 5); got != 5 {
		t.Errorf("no rules: PriorityFor = %d, want 5", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Profile)
		field string // "" = valid
	}{
		{"default", func(*Profile) {}, ""},
		{"full", func(p *Profile) {
			p.Callback = "https://example.org/hook?x=1"
			p.ReportCallback = "http://example.org:8080/reports"
			p.Notify = []string{"Curator <curator@example.org>", "ops@example.org"}
			p.Storage = "http://storage:8080/"
			p.Inventory = "https://inventory.example.org"
			p.LargeJobs = []SizeRule{{Over: 1, Priority: 99}}
		}, ""},
		{"uppercase name", func(p *Profile) { p.Name = "Demo" }, "name"},
		{"leading dot", func(p *Profile) { p.Name = ".demo" }, "name"},
		{"slash in name", func(p *Profile) { p.Name = "a/b" }, "name"},
		{"long name", func(p *Profile) { p.Name = strings.Repeat("a", MaxNameLen+1) }, "name"},
		{"negative priority", func(p *Profile) { p.Priority = -1 }, "priority"},
		{"callback scheme", func(p *Profile) { p.Callback = "mailto:x@example.org" }, "callback"},
		{"callback relative", func(p *Profile) { p.Callback = "/hook" }, "callback"},
		{"report_callback scheme", func(p *Profile) { p.ReportCallback = "ftp://example.org/r" }, "report_callback"},
		{"inventory host", func(p *Profile) { p.Inventory = "https:///x" }, "inventory"},
		// Named with the password masked: url.Parse's error repeats it.
		{"inventory unparsable", func(p *Profile) { p.Inventory = "postgres://u:p@s3cret word@db/inv" }, "inventory"},
		{"inventory key=value", func(p *Profile) { p.Inventory = "host=db password=s3cret" }, "inventory"},
		{"storage unparsable", func(p *Profile) { p.Storage = "/ocfl,https://u:s3cret%zz@storage.example.org/" }, "storage"},
		{"empty naan", func(p *Profile) { p.NAAN = "" }, "naan"},
		{"vowel shoulder", func(p *Profile) { p.Shoulder = "fa4" }, "shoulder"},
		{"rule priority", func(p *Profile) { p.LargeJobs = []SizeRule{{Over: 1, Priority: 100}} }, "large_jobs[0].priority"},
		{"rule negative", func(p *Profile) { p.LargeJobs = []SizeRule{{Over: -1, Priority: 1}} }, "large_jobs[0].over"},
		{"rule duplicate", func(p *Profile) { p.LargeJobs = []SizeRule{{Over: 9, Priority: 1}, {Over: 9, Priority: 2}} }, "large_jobs[1].over"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Default()
			tt.edit(p)
			err := p.Validate()
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.field != "" && (err == nil || !strings.Contains(err.Error(), `"`+tt.field+`"`)):
				t.Errorf("error %v does not name field %q", err, tt.field)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Errorf("error %v shows the password", err)
			}
		})
	}
}
