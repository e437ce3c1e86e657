package handlers

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ingestq/ingestq/handlers/internal/plainfile"
	"github.com/ingestq/ingestq/internal/durable"
)

// A job's hand-off is served only to whoever was given its URLs, as a
// presigned URL's object is: each URL carries the hand-off's key in its
// query (?key=, a name internal/redact masks wherever a URL is shown). The
// key is random, made with the job's first storage manifest and kept in its
// working folder for the folder's life, so that every step run again
// (a retry, a requeue) publishes the same URLs. A folder whose storage
// manifest is there without a key was handed on by a release before keys:
// it is served without one, as then, until its job ends.
const (
	handoffKeyFile  = "handoff.key"
	handoffKeyParam = "key"
)

// handoffKeyRE is a key as rand.Text makes it: base32, 128 bits or more.
var handoffKeyRE = regexp.MustCompile(`^[A-Z2-7]{26,}$`)

// errNoHandoff is a working folder that holds no hand-off: none written
// yet, or the folder is gone.
var errNoHandoff = errors.New("no hand-off in the working folder")

// maxKeyFileBytes bounds what is read of a key file: a key and its
// newline, with room to spare.
const maxKeyFileBytes = 128

// readHandoffKey is the key of the hand-off in the working folder work:
// "" when its storage manifest is there without one (a release before
// keys wrote it), errNoHandoff when neither is there. A key file is read
// only if it is a plain file (a symlink is not followed, a pipe not waited
// on), and no further than a key's length.
func readHandoffKey(work string) (string, error) {
	path := filepath.Join(work, handoffKeyFile)
	data, err := readKeyFile(path)
	switch {
	case err == nil:
		key := strings.TrimSpace(string(data))
		if !handoffKeyRE.MatchString(key) {
			err = fmt.Errorf("%d bytes; a key is 26 or more characters of base32", len(data))
			break
		}
		return key, nil
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(filepath.Join(work, storageManifest)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", errNoHandoff
			}
			return "", err
		}
		return "", nil
	case !errors.As(err, new(notAKeyError)):
		return "", err
	}
	// Removing the file alone would leave a manifest without a key, served
	// to anyone as a release before keys handed it on.
	return "", fmt.Errorf("%s holds no hand-off key (%w): remove the job's working folder %s and requeue the job, "+
		"not the key file alone (its hand-off would then be served without a key)", path, err, work)
}

// notAKeyError is a key file that is not a plain file of a key's length:
// why.
type notAKeyError string

func (e notAKeyError) Error() string { return string(e) }

// readKeyFile reads the key file at path, refusing what is not a plain
// file (plainfile: judged once open, so a file swapped for a link or a
// pipe after a look is refused too), or is longer than maxKeyFileBytes.
func readKeyFile(path string) ([]byte, error) {
	data, err := plainfile.Read(path, maxKeyFileBytes)
	if errors.Is(err, plainfile.ErrNotPlain) || errors.As(err, new(*plainfile.TooLongError)) {
		err = notAKeyError(err.Error())
	}
	return data, err
}

// makeHandoffKey is readHandoffKey, but a folder without a hand-off yet
// is given its key, kept durably before any URL with it is published. Of
// runs of the step at once (a session lost mid-step, the job taken again
// while the first run winds down), the first to create the key file gives
// the key the others read: each publishes the URL the folder serves.
func makeHandoffKey(work string) (string, error) {
	key, err := readHandoffKey(work)
	if !errors.Is(err, errNoHandoff) {
		return key, err
	}
	key = rand.Text()
	switch err := durable.CreateFile(filepath.Join(work, handoffKeyFile), []byte(key+"\n")); {
	case errors.Is(err, fs.ErrExist):
		return readHandoffKey(work)
	case err != nil:
		return "", fmt.Errorf("keeping the hand-off's key: %w", err)
	}
	return key, nil
}

// keyGiven tells whether the request carries the hand-off's key ("": a
// hand-off from before keys, which any request reads), compared in constant
// time.
func keyGiven(r *http.Request, key string) bool {
	return key == "" || subtle.ConstantTimeCompare([]byte(r.URL.Query().Get(handoffKeyParam)), []byte(key)) == 1
}
