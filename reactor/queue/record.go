package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
)

// Submission is the JSON of /batches/<bid>/submission: what a depositor
// asked for. The fields are the ones ingestq reads, under ingestq's names
// (Merritt's names are read too: see fromMerritt); every other key is kept
// in Extra and written back unchanged.
type Submission struct {
	BatchUUID      string `json:"batchID,omitempty"`
	Profile        string `json:"profile_name,omitempty"`
	Submitter      string `json:"submitter,omitempty"`
	PayloadURL     string `json:"payload_url,omitempty"`
	Type           string `json:"type,omitempty"` // auto, file, container or manifest
	SubmissionMode string `json:"submission_mode,omitempty"`
	ResponseType   string `json:"response_type,omitempty"`
	Priority       *int   `json:"priority,omitempty"`

	// The one object of a file or container payload.
	FileName  string `json:"file_name,omitempty"`
	HashAlg   string `json:"hash_algorithm,omitempty"`
	HashValue string `json:"hash_value,omitempty"`
	FileSize  *int64 `json:"file_size,omitempty"`
	PrimaryID string `json:"primary_id,omitempty"`
	LocalIDs  string `json:"local_id,omitempty"` // "a;b": see SplitLocalIDs
	Who       string `json:"erc_who,omitempty"`
	What      string `json:"erc_what,omitempty"`
	When      string `json:"erc_when,omitempty"`
	Where     string `json:"erc_where,omitempty"`

	Extra Extra `json:"-"`
}

// JobConfig is the JSON of /jobs/<jid>/configuration: what a job's steps
// need to know of its object. Keys other than its fields are kept in Extra.
type JobConfig struct {
	JobID          string `json:"jobID,omitempty"` // mrt-zk's Job.jid() reads it
	BatchUUID      string `json:"batchID,omitempty"`
	Profile        string `json:"profile_name,omitempty"`
	Submitter      string `json:"submitter,omitempty"`
	SubmissionMode string `json:"submission_mode,omitempty"`
	ResponseType   string `json:"response_type,omitempty"`
	PayloadURL     string `json:"payload_url,omitempty"`
	PayloadType    string `json:"payload_type,omitempty"` // file, container or object_manifest
	FileName       string `json:"file_name,omitempty"`
	HashAlg        string `json:"hash_algorithm,omitempty"`
	HashValue      string `json:"hash_value,omitempty"`
	FileSize       *int64 `json:"file_size,omitempty"`
	// ObjectKey names the object, unique within the batch: how a batch
	// handler run again knows which objects have jobs, and how Check finds
	// an object with two.
	ObjectKey    string `json:"object_key,omitempty"`
	ManifestLine int    `json:"manifest_line,omitempty"`
	// WorkingDir is the job's working folder (Merritt's name): set by
	// Downloading, where the files went. WorkingHost names the host that
	// holds it when it is not on a file system every host mounts: the steps
	// after Downloading go to that host while it lives.
	WorkingDir  string `json:"working_dir,omitempty"`
	WorkingHost string `json:"working_host,omitempty"`

	Extra Extra `json:"-"`
}

// Extra holds the keys of a record that ingestq has no field for, as read.
type Extra map[string]json.RawMessage

// String is key's value when it is a JSON string, else "".
func (e Extra) String(key string) string {
	var s string
	_ = json.Unmarshal(e[key], &s)
	return s
}

// Number is key's value when it is a JSON number.
func (e Extra) Number(key string) (float64, bool) {
	var n float64
	err := json.Unmarshal(e[key], &n)
	return n, err == nil && e[key] != nil
}

// Set stores v (encoded as JSON) under key, making e when it is nil.
func (e *Extra) Set(key string, v any) {
	if *e == nil {
		*e = Extra{}
	}
	(*e)[key] = mustJSON(v)
}

// The records decode leniently: a key whose value does not fit its field
// (a foreign writer's string where ingestq wants a number) stays in Extra
// and the field stays empty, as the readers of the former map[string]any
// took it; so one odd key never makes a job unreadable.

// UnmarshalJSON reads a submission, adding ingestq's names for Merritt's.
func (s *Submission) UnmarshalJSON(data []byte) error {
	type plain Submission
	return decodeRecord(data, (*plain)(s), &s.Extra)
}

// MarshalJSON writes the fields and Extra as one object.
func (s Submission) MarshalJSON() ([]byte, error) {
	type plain Submission
	return encodeRecord(plain(s), s.Extra)
}

// UnmarshalJSON reads a configuration, adding ingestq's names for Merritt's.
func (c *JobConfig) UnmarshalJSON(data []byte) error {
	type plain JobConfig
	return decodeRecord(data, (*plain)(c), &c.Extra)
}

// MarshalJSON writes the fields and Extra as one object.
func (c JobConfig) MarshalJSON() ([]byte, error) {
	type plain JobConfig
	return encodeRecord(plain(c), c.Extra)
}

// decodeRecord fills the json-tagged fields of *dst (a pointer to a struct)
// from the object in data and leaves every key it did not take in extra.
func decodeRecord(data []byte, dst any, extra *Extra) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	fromMerritt(m)
	v := reflect.ValueOf(dst).Elem()
	for i := range v.NumField() {
		name := jsonName(v.Type().Field(i))
		raw, ok := m[name]
		if name == "" || !ok || string(raw) == "null" {
			continue
		}
		field := reflect.New(v.Field(i).Type())
		if json.Unmarshal(raw, field.Interface()) == nil {
			v.Field(i).Set(field.Elem())
			delete(m, name)
		}
	}
	*extra = nil
	if len(m) > 0 {
		*extra = m
	}
	return nil
}

// decodeStatus fills *dst (a pointer to the status struct name) strictly, as a
// status must be read, and leaves in extra the keys it has no field for: a
// foreign writer's, which mrt-zk's setStatus carries over on every move.
func decodeStatus(data []byte, name string, dst any, extra *Extra) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if err := json.Unmarshal(data, dst); err != nil {
		// The error names dst's type, the callers' local "plain": name
		// the record instead, as the operator reads it.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Struct = name
		}
		return err
	}
	// encoding/json fills a field from its key in any case ("Holder" too):
	// such a key is the field's, or a move that drops the field (holder,
	// deferred: omitempty) would write it back from extra.
	t := reflect.TypeOf(dst).Elem()
	for key := range m {
		for i := range t.NumField() {
			if strings.EqualFold(key, jsonName(t.Field(i))) {
				delete(m, key)
			}
		}
	}
	*extra = nil
	if len(m) > 0 {
		*extra = m
	}
	return nil
}

// encodeRecord writes the fields of rec over a copy of extra.
func encodeRecord(rec any, extra Extra) ([]byte, error) {
	fields, err := json.Marshal(rec)
	if err != nil || len(extra) == 0 {
		return fields, err
	}
	m := maps.Clone(extra)
	if err := json.Unmarshal(fields, (*map[string]json.RawMessage)(&m)); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]json.RawMessage(m))
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// SubmissionOf makes a submission from fields as a caller has them (a
// command line's key=value pairs, a test), read as a daemon reads the node.
func SubmissionOf(fields map[string]any) Submission {
	var s Submission
	if err := json.Unmarshal(mustJSON(fields), &s); err != nil {
		panic(fmt.Sprintf("queue: submission of %v: %v", fields, err)) // an object always decodes
	}
	return s
}

// JobConfigOf makes a configuration from fields, as SubmissionOf does.
func JobConfigOf(fields map[string]any) JobConfig {
	var c JobConfig
	if err := json.Unmarshal(mustJSON(fields), &c); err != nil {
		panic(fmt.Sprintf("queue: configuration of %v: %v", fields, err))
	}
	return c
}

// Map is the submission as the JSON object it is written as.
func (s Submission) Map() map[string]any { return asMap(s) }

// Map is the configuration as the JSON object it is written as.
func (c JobConfig) Map() map[string]any { return asMap(c) }

func asMap(v any) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(mustJSON(v), &m)
	return m
}
