package queue

import (
	"errors"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The Go tables must say exactly what mrt-zk's states file says.
func TestMachinesMatchReference(t *testing.T) {
	data, err := os.ReadFile("../../testdata/reference/mrt-zk-states.yml")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]map[string]map[string]*struct {
		Success bool `yaml:"success"`
		Fail    bool `yaml:"fail"`
	}
	if err := yaml.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	for key, m := range map[string]*Machine{"job_states": JobMachine, "batch_states": BatchMachine, "access_states": AccessMachine} {
		states := ref[key]
		if len(states) != len(m.States) {
			t.Errorf("%s: reference has %d states, table %d", key, len(states), len(m.States))
		}
		for from, edges := range states {
			if !m.Known(State(from)) {
				t.Errorf("%s: state %s missing from the table", key, from)
				continue
			}
			if len(edges) != len(m.Edges(State(from))) {
				t.Errorf("%s: %s has %d edges in the reference, %d in the table", key, from, len(edges), len(m.Edges(State(from))))
			}
			for to, mark := range edges {
				var got *Edge
				for _, e := range m.Edges(State(from)) {
					if e.To == State(to) {
						got = &e
					}
				}
				want := Edge{To: State(to)}
				if mark != nil {
					want.Success, want.Fail = mark.Success, mark.Fail
				}
				if got == nil || *got != want {
					t.Errorf("%s: %s → %s: table %+v, reference %+v", key, from, to, got, want)
				}
			}
		}
	}
}

func TestIllegalTransitionNamesStates(t *testing.T) {
	err := JobMachine.Check("jid0000000007", Downloading, Completed)
	if !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("err %v, want ErrIllegalTransition", err)
	}
	for _, want := range []string{"jid0000000007", "Downloading", "Completed", "Processing, Failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if err := JobMachine.Check("j", Completed, Pending); !strings.Contains(err.Error(), "none: it is final") {
		t.Errorf("from a final state: %v", err)
	}
}

func TestLastSuccessfulStatus(t *testing.T) {
	p := func(s State) *State { return &s }
	cases := []struct {
		prev     *State
		old, new State
		want     *State
	}{
		{nil, Pending, Estimating, p(Pending)},
		{p(Pending), Estimating, Failed, p(Pending)},    // failure keeps it
		{p(Recording), Failed, Notify, p(Recording)},    // requeue keeps it (Ruby, not Java)
		{p(Notify), Notify, Notify, p(Notify)},          // no change of state
		{p(Recording), Notify, Completed, p(Notify)},    // success records the step
		{p(Recording), Failed, Deleted, p(Recording)},   // delete keeps it
		{nil, Pending, Held, nil},                       // a hold is no step (decision 250)
		{p(Downloading), Held, Pending, p(Downloading)}, // nor is a release: Held is never recorded
		{p(Downloading), Downloading, Deleted, p(Downloading)},
	}
	for _, c := range cases {
		got := nextLastSuccessful(c.prev, c.old, c.new)
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("%v: %s → %s: got %v, want %v", c.prev, c.old, c.new, got, c.want)
		}
	}
}

func TestRefNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		p    int
		jid  string
	}{
		{"05-jid0000000001", true, 5, "jid0000000001"},
		{"99-jid1", true, 99, "jid1"},
		{"5-jid1", false, 0, ""},
		{"05jid1", false, 0, ""},
		{"xx-jid1", false, 0, ""},
		{"05-bid1", false, 0, ""},
		{"", false, 0, ""},
	} {
		p, jid, ok := parseRef(c.name)
		if ok != c.ok || p != c.p || jid != c.jid {
			t.Errorf("parseRef(%q) = %d %q %v", c.name, p, jid, ok)
		}
	}
	if got := refName(2, "jid0000000003"); got != "02-jid0000000003" {
		t.Errorf("refName: %s", got)
	}
}
