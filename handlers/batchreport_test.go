package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/api"
	"github.com/ingestq/ingestq/ops"
	"github.com/ingestq/ingestq/reactor/queue"
	"github.com/ingestq/ingestq/zkwatch/zktest"
)

// A Failed batch says how many of its jobs failed, and its status-report
// (the node, and so the API's batch) gives each completed job's object and
// each failed job's reason, as the report's event does, in fields added
// after mrt-zk's three, which keep their names and meaning.
func TestBatchReportGivesARKsAndReasons(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	b, jobs := reportBatch(t, r)
	bad := jobs["bad.txt"]
	if want := "1 of 3 jobs failed"; b.Status.Message != want {
		t.Errorf("batch message %q, want %q", b.Status.Message, want)
	}

	// The node as Merritt's readers read it: its three fields as they were.
	data, _, err := zktest.Connect(t).Get(r.q.Path("/batches/" + b.ID + "/status-report"))
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]json.RawMessage
	if err := json.Unmarshal(data, &node); err != nil {
		t.Fatalf("status-report %s: %v", data, err)
	}
	var succ, failed []string
	if json.Unmarshal(node["successful_jobs"], &succ) != nil || json.Unmarshal(node["failed_jobs"], &failed) != nil ||
		len(node["last_modified"]) == 0 || len(succ) != 2 || !slices.Equal(failed, []string{bad.ID}) {
		t.Errorf("status-report %s: want mrt-zk's last_modified, successful_jobs (2) and failed_jobs [%s]", data, bad.ID)
	}

	// Through the API.
	srvAPI, err := api.New(api.Config{Ops: &ops.Service{Q: r.q}, Logger: r.log})
	if err != nil {
		t.Fatal(err)
	}
	defer srvAPI.Close()
	srv := httptest.NewServer(srvAPI)
	defer srv.Close()
	resp, err := http.Get(srv.URL + api.Prefix + "batches/" + b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		State   string `json:"state"`
		Message string `json:"message"`
		Report  struct {
			SuccessfulJobs []string                     `json:"successful_jobs"`
			FailedJobs     []string                     `json:"failed_jobs"`
			Objects        map[string]queue.Identifiers `json:"objects"`
			Failures       map[string]string            `json:"failures"`
			FailedObjects  map[string]queue.Identifiers `json:"failed_objects"`
		} `json:"report"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET batch: %s, %v", resp.Status, err)
	}
	if got.State != string(queue.Failed) || got.Message != "1 of 3 jobs failed" {
		t.Errorf("API batch %s %q, want Failed \"1 of 3 jobs failed\"", got.State, got.Message)
	}
	for _, name := range []string{"one.txt", "two.txt"} {
		j := jobs[name]
		ark := r.checkStored(j, object{name: []byte("content of " + name + "\n")})
		if id := got.Report.Objects[j.ID]; id.PrimaryID != ark {
			t.Errorf("API report's objects[%s] = %+v, want %s", j.ID, id, ark)
		}
	}
	if len(got.Report.Objects) != 2 {
		t.Errorf("API report's objects %v, want the 2 completed jobs", got.Report.Objects)
	}
	if len(got.Report.Failures) != 1 || got.Report.Failures[bad.ID] != bad.Status.Message || !strings.Contains(bad.Status.Message, "md5 mismatch") {
		t.Errorf("API report's failures %v, want {%s: %q}", got.Report.Failures, bad.ID, bad.Status.Message)
	}
	// The failed job's object, by the local id its depositor knows it by.
	if id, ok := got.Report.FailedObjects[bad.ID]; len(got.Report.FailedObjects) != 1 || !ok || !slices.Equal(id.LocalIDs, []string{"local-bad.txt"}) {
		t.Errorf("API report's failed_objects %v, want {%s: local id local-bad.txt}", got.Report.FailedObjects, bad.ID)
	}
}
