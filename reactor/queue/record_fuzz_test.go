package queue_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ingestq/ingestq/reactor/queue"
)

// FuzzRecords feeds a submission and a job configuration arbitrary node
// bytes, as a foreign writer may leave them: reading never panics, and a
// record that reads is written back in a form that reads back to itself
// (one write settles it: Merritt's names are taken on the first read).
func FuzzRecords(f *testing.F) {
	for _, seed := range []string{
		`{"batchID":"u-1","file_size":"12 KB","jobID":"jid0000000001","merritt_only":{"a":[1,2]},"payload_url":"https://x/y","profile_name":"demo"}`,
		`{"profile":"merritt_demo","type":"batchManifestFile","digestType":"SHA-256","digestValue":"ab","size":0,"title":"T","localID":""}`,
		`{"manifest_line":"seven","profile_name":null,"priority":[1]}`,
		`{"priority":5,"file_size":12,"type":"file","hash_algorithm":"md5"}`,
		`null`, `[1,2]`, `{}`, `{"digestType":7}`, `{"type":{"x":1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		settles(t, data, new(queue.Submission), func() any { return new(queue.Submission) })
		settles(t, data, new(queue.JobConfig), func() any { return new(queue.JobConfig) })
	})
}

// settles reads data into rec; when it reads, the record written and read
// again is written the same way.
func settles(t *testing.T, data []byte, rec any, fresh func() any) {
	if json.Unmarshal(data, rec) != nil {
		return
	}
	once, err := json.Marshal(rec)
	if err != nil {
		t.Fatalf("%T read from %q does not write: %v", rec, data, err)
	}
	again := fresh()
	if err := json.Unmarshal(once, again); err != nil {
		t.Fatalf("%T written as %s does not read back: %v", rec, once, err)
	}
	twice, err := json.Marshal(again)
	if err != nil || !bytes.Equal(once, twice) {
		t.Fatalf("%T from %q: written as\n%s\nthen as\n%s (%v)", rec, data, once, twice, err)
	}
}
