package profile

import (
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ingestq/ingestq/zkwatch/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(zktest.WithShared(m)) }

func mustSet(t *testing.T, ps ...*Profile) *Set {
	t.Helper()
	s, err := NewSet(ps...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPublishKnown(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	other := &Profile{
		Name: "ucb-lib", Priority: 3, NAAN: "13030", Shoulder: "m5",
		Callback: "https://example.org/done", Notify: []string{"a@example.org"},
		LargeJobs: []SizeRule{{Over: 10 << 30, Priority: 20}},
	}
	if err := Publish(conn, root, mustSet(t, Default(), other)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*Profile{Default(), other} {
		got, ok, err := Known(conn, root, want.Name)
		if err != nil || !ok {
			t.Fatalf("Known(%s) = %v, %v", want.Name, ok, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Known(%s) = %+v, want %+v", want.Name, got, want)
		}
	}
	if p, ok, err := Known(conn, root, "never-published"); ok || p != nil || err != nil {
		t.Errorf("Known(never-published) = %+v, %v, %v", p, ok, err)
	}

	// Publishing again overwrites, and leaves profiles not in the set alone.
	changed := *other
	changed.Priority = 9
	if err := Publish(conn, root, mustSet(t, &changed)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := Known(conn, root, "ucb-lib"); got == nil || got.Priority != 9 {
		t.Errorf("after republish: %+v, want priority 9", got)
	}
	if _, ok, err := Known(conn, root, "demo"); !ok || err != nil {
		t.Errorf("demo was dropped by a later publish: %v, %v", ok, err)
	}
	if _, _, err := conn.Get(root + "/ingestq/profiles/demo"); err != nil {
		t.Errorf("node is not where the registry documents it: %v", err)
	}
}

func TestPublishEmptyRoot(t *testing.T) {
	conn := zktest.Connect(t)
	t.Cleanup(func() {
		if err := zktest.DeleteTree(conn, "/ingestq"); err != nil {
			t.Error(err)
		}
	})
	if err := Publish(conn, "", mustSet(t, Default())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := conn.Get("/ingestq/profiles/demo"); err != nil {
		t.Errorf("root \"\": %v", err)
	}
	if _, ok, err := Known(conn, "", "demo"); !ok || err != nil {
		t.Errorf("Known = %v, %v", ok, err)
	}
}

func TestKnownErrors(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	if err := Publish(conn, root, mustSet(t, Default())); err != nil {
		t.Fatal(err)
	}
	dir := root + "/ingestq/profiles"
	if _, err := conn.Create(dir+"/garbled", []byte("{not json"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(dir+"/renamed", []byte(`{"name":"demo"}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ root, name, want string }{
		{root, "garbled", dir + "/garbled"},
		{root, "renamed", dir + "/renamed"},
		{root, "../escape", "profile name"},
		{root, "", "profile name"},
		{"relative", "demo", `"relative"`},
	}
	for _, tt := range tests {
		p, ok, err := Known(conn, tt.root, tt.name)
		if err == nil || ok || p != nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Known(%q, %q) = %v, %v, %v; want an error mentioning %q", tt.root, tt.name, p, ok, err, tt.want)
		}
	}
	if err := Publish(conn, "relative", mustSet(t, Default())); err == nil {
		t.Error("Publish with a relative root: no error")
	}
	if err := Publish(conn, root, nil); err == nil {
		t.Error("Publish(nil): no error")
	}
}
