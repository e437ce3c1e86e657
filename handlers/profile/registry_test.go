package profile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/ingestq/ingestq/reactor/queue"
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
	q := newQueue(t, conn, root)
	other := &Profile{
		Name: "ucb-lib", Priority: 3, NAAN: "13030", Shoulder: "m5",
		Callback: "https://example.org/done", Notify: []string{"a@example.org"},
		LargeJobs: []SizeRule{{Over: 10 << 30, Priority: 20}},
	}
	if err := Publish(t.Context(), q, mustSet(t, Default(), other)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*Profile{Default(), other} {
		got, ok, err := Known(t.Context(), q, want.Name)
		if err != nil || !ok {
			t.Fatalf("Known(%s) = %v, %v", want.Name, ok, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Known(%s) = %+v, want %+v", want.Name, got, want)
		}
	}
	if p, ok, err := Known(t.Context(), q, "never-published"); ok || p != nil || err != nil {
		t.Errorf("Known(never-published) = %+v, %v, %v", p, ok, err)
	}

	// Publishing again overwrites, and leaves profiles not in the set alone.
	changed := *other
	changed.Priority = 9
	if err := Publish(t.Context(), q, mustSet(t, &changed)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := Known(t.Context(), q, "ucb-lib"); got == nil || got.Priority != 9 {
		t.Errorf("after republish: %+v, want priority 9", got)
	}
	if _, ok, err := Known(t.Context(), q, "demo"); !ok || err != nil {
		t.Errorf("demo was dropped by a later publish: %v, %v", ok, err)
	}
	if _, _, err := conn.Get(root + "/ingestq/profiles/demo"); err != nil {
		t.Errorf("node is not where the registry documents it: %v", err)
	}
}

func TestKnownErrors(t *testing.T) {
	conn, root := zktest.Connect(t), zktest.Root(t)
	q := newQueue(t, conn, root)
	if err := Publish(t.Context(), q, mustSet(t, Default())); err != nil {
		t.Fatal(err)
	}
	dir := root + "/ingestq/profiles"
	acl := zk.WorldACL(zk.PermAll)
	if _, err := conn.Create(dir+"/garbled", []byte("{not json"), 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(dir+"/renamed", []byte(`{"name":"demo"}`), 0, acl); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, want string }{
		{"garbled", "published garbled"},
		{"renamed", "published renamed holds profile \"demo\""},
		{"../escape", "profile name"},
		{"", "profile name"},
	}
	for _, tt := range tests {
		p, ok, err := Known(t.Context(), q, tt.name)
		if err == nil || ok || p != nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Known(%q) = %v, %v, %v; want an error mentioning %q", tt.name, p, ok, err, tt.want)
		}
	}
	if err := Publish(t.Context(), q, nil); err == nil {
		t.Error("Publish(nil): no error")
	}
}

func newQueue(t *testing.T, conn *zk.Conn, root string) *queue.Queue {
	t.Helper()
	q, err := queue.New(conn, root)
	if err == nil {
		err = q.Init(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	return q
}
