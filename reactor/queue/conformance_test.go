package queue_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
	"gopkg.in/yaml.v3"

	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// The port of mrt-zk's own test suite: each scenario runs through this
// package's API against a real ZooKeeper, and the tree it leaves is compared
// with the library's expected tree by the library's rules
// (testdata/reference/README.md).

type testCase struct {
	Input  map[string]any `yaml:"input"`
	Output map[string]any `yaml:"output"`
}

func loadCases(t *testing.T) map[string]testCase {
	t.Helper()
	data, err := os.ReadFile("../../testdata/reference/mrt-zk-test-cases.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]testCase
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// scenario is one test's steps, given a fresh queue.
type scenario func(r *run)

func TestConformance(t *testing.T) {
	cases := loadCases(t)
	if len(cases) != len(scenarios) {
		t.Errorf("reference has %d cases, the port has %d", len(cases), len(scenarios))
	}
	var equal atomic.Int32
	t.Run("group", func(t *testing.T) { // returns when every parallel scenario has
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				steps, found := scenarios[name]
				if !found {
					t.Fatalf("no port of %s", name)
				}
				r := newRun(t)
				r.load(tc.Input)
				steps(r)
				r.compare(tc.Output)
				equal.Add(1)
			})
		}
	})
	t.Logf("conformance: %d of %d scenarios equal", equal.Load(), len(cases))
}

// run is one scenario's queue, and the names its real ids stand for.
type run struct {
	t     testing.TB
	root  string
	conn  *zk.Conn
	q     *queue.Queue
	alias map[string]string // real id → placeholder
}

func newRun(t testing.TB) *run {
	root := zktest.Root(t)
	conn := zktest.Connect(t)
	q, err := queue.New(conn, root, queue.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &run{t: t, root: root, conn: conn, q: q, alias: map[string]string{}}
}

func (r *run) ok(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *run) name(placeholder, real string) { r.alias[real] = placeholder }

// second opens another session on the same queue.
func (r *run) second() (*zk.Conn, *queue.Queue) {
	conn := zktest.Connect(r.t)
	q, err := queue.New(conn, r.root, queue.WithLogger(testLogger(r.t)))
	r.ok(err)
	return conn, q
}

// hostsAB are two more sessions' queues, registered as hosts "a" and "b",
// with a's connection.
func (r *run) hostsAB() (connA *zk.Conn, qa, qb *queue.Queue) {
	connA, qa = r.second()
	_, qb = r.second()
	r.ok(qa.RegisterHost(r.t.Context(), "a", nil))
	r.ok(qb.RegisterHost(r.t.Context(), "b", nil))
	return connA, qa, qb
}

// closeAndWait closes a session and waits for its ephemeral node p to go.
func (r *run) closeAndWait(conn *zk.Conn, p string) {
	r.t.Helper()
	ok, _, ev, err := r.conn.ExistsW(r.q.Path(p))
	r.ok(err)
	if !ok {
		r.t.Fatalf("%s is not there", p)
	}
	conn.Close()
	waitEvent(r.t, ev, zk.EventNodeDeleted, p+" to go with its session")
}

// load creates the input nodes: null → empty, string as is, int as decimal
// text, map as JSON; missing parents empty.
func (r *run) load(input map[string]any) {
	for p, v := range input {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i := range parts[:len(parts)-1] {
			_, err := r.conn.Create(r.q.Path("/"+strings.Join(parts[:i+1], "/")), nil, 0, zk.WorldACL(zk.PermAll))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				r.t.Fatal(err)
			}
		}
		var data []byte
		switch v := v.(type) {
		case nil:
		case string:
			data = []byte(v)
		case int:
			data = []byte(strings.TrimSpace(jsonString(v)))
		default:
			data = []byte(jsonString(v))
		}
		_, err := r.conn.Create(r.q.Path(p), data, 0, zk.WorldACL(zk.PermAll))
		r.ok(err)
	}
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var stamp = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [+-]\d{4}$`)

// compare lists the tree, maps real ids to placeholders and timestamps to
// "now", leaves out ingestq's own status key, and compares it with want as
// JSON values.
func (r *run) compare(want map[string]any) {
	r.t.Helper()
	entries, err := r.q.Tree(r.t.Context(), "")
	r.ok(err)
	reals := make([]string, 0, len(r.alias))
	for real := range r.alias {
		reals = append(reals, real)
	}
	slices.SortFunc(reals, func(a, b string) int { return len(b) - len(a) })
	rename := func(s string) string {
		for _, real := range reals {
			s = strings.ReplaceAll(s, real, r.alias[real])
		}
		return s
	}
	var scrub func(v any) any
	scrub = func(v any) any {
		switch v := v.(type) {
		case string:
			if stamp.MatchString(v) {
				return "now"
			}
			return rename(v)
		case map[string]any:
			out := map[string]any{}
			for k, x := range v {
				if k == "ingestq_move" {
					continue // ingestq's mark of its own moves (JobStatus.Move), which mrt-zk keeps as any key
				}
				out[k] = scrub(x)
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				out[i] = scrub(x)
			}
			return out
		}
		return v
	}
	got := map[string]any{}
	for _, e := range entries {
		got[rename(e.Path)] = scrub(e.Value)
	}
	g, w := normalize(got), normalize(want)
	if !reflect.DeepEqual(g, w) {
		gj, _ := json.MarshalIndent(g, "", "  ")
		wj, _ := json.MarshalIndent(w, "", "  ")
		r.t.Fatalf("tree differs\n got: %s\nwant: %s", gj, wj)
	}
}

// normalize makes YAML- and JSON-decoded values comparable.
func normalize(v map[string]any) any {
	if v == nil {
		v = map[string]any{}
	}
	var out any
	if err := json.Unmarshal([]byte(jsonString(v)), &out); err != nil {
		panic(err)
	}
	return out
}

// testLogger sends the queue's log to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
