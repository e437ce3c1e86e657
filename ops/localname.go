package ops

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/ingestq/ingestq/handlers"
	"github.com/ingestq/ingestq/handlers/checkm"
	"github.com/ingestq/ingestq/internal/redact"
	"github.com/ingestq/ingestq/reactor/queue"
)

// LocalNameRefused is why intake (checkm.CleanName) refuses the name of
// the local file at path when that name would be the stored file's, and
// that name; nil when it is taken or is not stored. The file's own name is
// the stored one with type file, and with auto when the file is neither
// a checkm manifest nor a zip (handlers.SniffLocalFile, on its first bytes,
// as the daemon reads them); a file that cannot be read here is left to
// the daemon that fetches it, which may. A file_name given instead is
// checked with the submission's fields.
func LocalNameRefused(path, typ string) (name string, refused error) {
	if typ != handlers.SubmitFile && typ != handlers.SubmitAuto && typ != "" {
		return "", nil
	}
	name = filepath.Base(path)
	_, refused = checkm.CleanName(name)
	if refused == nil || typ != handlers.SubmitFile && !storedAsAFile(path) {
		return "", nil
	}
	return name, refused
}

// storedAsAFile tells whether type auto takes the local file for a single
// file (handlers.SniffLocalFile); false when it cannot be read, or is no
// plain file: a pipe without a writer held the request that asked for
// good.
func storedAsAFile(path string) bool {
	kind, err := handlers.SniffLocalFile(path)
	return err == nil && kind == handlers.SubmitFile
}

// checkLocalName refuses a file: payload of a submission that names no
// file_name when intake would refuse the name it is stored under
// (LocalNameRefused): its job would fail at Downloading.
func checkLocalName(sub queue.Submission, path string) error {
	if sub.FileName != "" {
		return nil
	}
	name, refused := LocalNameRefused(path, sub.Type)
	if refused == nil {
		return nil
	}
	return &FieldError{Field: "payload_url", Value: strconv.Quote(redact.Location(sub.PayloadURL)),
		Problem: fmt.Sprintf("its name %q would be the stored file's, and intake refuses it: %v; "+
			"rename the file, or give the name to store it under as file_name", name, refused)}
}
