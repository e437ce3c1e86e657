package queue_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// A configuration written by another program comes back as it was: keys
// ingestq has no field for, and a field's key holding a value of another
// type (kept as written, the field left empty), survive a read and a write.
func TestJobConfigRoundTrip(t *testing.T) {
	in := `{"batchID":"u-1","file_size":"12 KB","jobID":"jid0000000001","merritt_only":{"a":[1,2]},"payload_url":"https://x/y","profile_name":"demo"}`
	var c queue.JobConfig
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if c.Profile != "demo" || c.PayloadURL != "https://x/y" || c.JobID != "jid0000000001" || c.FileSize != nil {
		t.Errorf("decoded %+v", c)
	}
	if c.Extra.String("file_size") != "12 KB" {
		t.Errorf("file_size of another type not kept: %q", c.Extra["file_size"])
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("written back as\n%s\nwant\n%s", out, in)
	}
}

// Merritt's names fill ingestq's fields; its "not given" (0 and "") does
// not; its batch manifest types read as "manifest".
func TestSubmissionMerrittNames(t *testing.T) {
	var s queue.Submission
	in := `{"profile":"merritt_demo","type":"batchManifestFile","digestType":"SHA-256","digestValue":"ab","size":0,"title":"T","localID":""}`
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	if s.Profile != "merritt_demo" || s.Type != "manifest" || s.HashAlg != "sha256" || s.HashValue != "ab" || s.What != "T" {
		t.Errorf("decoded %+v", s)
	}
	if s.FileSize != nil || s.LocalIDs != "" {
		t.Errorf("Merritt's empty values were taken: size %v, local id %q", s.FileSize, s.LocalIDs)
	}
	if s.Extra.String("profile") != "merritt_demo" {
		t.Errorf("Merritt's own key was not kept: %v", s.Extra)
	}
}

// An odd value never makes a record unreadable; only a node that is not a
// JSON object is an error.
func TestRecordLenient(t *testing.T) {
	var c queue.JobConfig
	if err := json.Unmarshal([]byte(`{"manifest_line":"seven","profile_name":null,"priority":[1]}`), &c); err != nil {
		t.Errorf("odd values refused: %v", err)
	}
	if c.ManifestLine != 0 || c.Profile != "" || len(c.Extra) != 3 {
		t.Errorf("decoded %+v", c)
	}
	if err := json.Unmarshal([]byte(`[1,2]`), &c); err == nil {
		t.Error("an array was read as a configuration")
	}
}

// A status field of the wrong type is named by the record's type, as
// check, ls and the API print it, not by the decoder's local alias.
func TestStatusTypeErrorNamesTheRecord(t *testing.T) {
	for _, c := range []struct {
		name string
		dst  any
		data string
	}{
		{"JobStatus.retry_count", &queue.JobStatus{}, `{"status":"Pending","retry_count":"x"}`},
		{"BatchStatus.message", &queue.BatchStatus{}, `{"status":"Pending","message":7}`},
	} {
		err := json.Unmarshal([]byte(c.data), c.dst)
		if err == nil || !strings.Contains(err.Error(), "Go struct field "+c.name+" ") {
			t.Errorf("%s: error %v, want it to name %s", c.data, err, c.name)
		}
	}
}
