package ops

import (
	"errors"
	"testing"
)

// A field given a value it does not take (a number for local_id, text for
// file_size) is refused, naming the field and what it takes: the
// submission kept the value aside, the field empty, without a word.
func TestSubmissionRefusesAValueItsFieldDoesNotTake(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key  string
		val  any
		want string
	}{
		{"local_id", 12345.0, "local_id 12345: want a string"},
		{"erc_when", true, "erc_when true: want a string"},
		{"file_size", "big", `file_size "big": want a whole number`},
	} {
		_, err := Submission(SubmitRequest{Profile: "demo", Submitter: "u", PayloadURL: "https://example.org/a.tif",
			Fields: map[string]any{c.key: c.val}})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.key || err.Error() != c.want {
			t.Errorf("%s %v: %v, want %q", c.key, c.val, err, c.want)
		}
	}
	sub, err := Submission(SubmitRequest{Profile: "demo", Submitter: "u", PayloadURL: "https://example.org/a.tif",
		Fields: map[string]any{"local_id": "12345", "file_size": 7, "fail_job": 3}})
	if err != nil || sub.LocalIDs != "12345" || sub.FileSize == nil || *sub.FileSize != 7 {
		t.Errorf("fields that fit: %+v %v", sub, err)
	}
}
