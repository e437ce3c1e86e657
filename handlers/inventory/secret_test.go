package inventory

import (
	"errors"
	"strings"
	"testing"

	"github.com/ingestq/ingestq/internal/pgtest"
)

// An inventory database that cannot be used is named in the error (which
// the daemon logs, and the API and the CLI answer) without its password: a
// wrong database on a real server, where pgx's connect error names the user
// and the database; a password pgx cannot parse, of which pgx's own message
// hid only the start ("postgres:xxxxx@s3cret word@127.0.0.1").
func TestPostgresErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	s := pgtest.Shared(t)
	withPassword := func(password, db string) string {
		return strings.Replace(s.URL(db), "postgres://postgres@", "postgres://postgres:"+password+"@", 1)
	}
	for _, c := range []struct {
		name, url, says string
		invalid         bool
	}{
		{"no such database", withPassword("s3cret", "no_such_db"), `database "no_such_db" does not exist`, false},
		{"a space in the password", withPassword("p@s3cret word", "inv"), "invalid PostgreSQL URL postgres://postgres:xxxxx@127.0.0.1:", true},
		{"a bad escape in the password", withPassword("s3cret%zz", "inv"), "invalid PostgreSQL URL postgres://postgres:xxxxx@127.0.0.1:", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, open := range []func() (Handle, error){
				func() (Handle, error) { return Open(t.Context(), c.url, "", nil) },
				func() (Handle, error) { return OpenReader(t.Context(), c.url, "", nil) },
			} {
				h, err := open()
				if err == nil {
					h.Close()
					t.Fatalf("%s opened", c.url)
				}
				if msg := err.Error(); strings.Contains(msg, "s3cret") || !strings.Contains(msg, c.says) || errors.Is(err, ErrInvalid) != c.invalid {
					t.Errorf("error %q; want it to say %q (invalid: %v), without the password", msg, c.says, c.invalid)
				}
			}
		})
	}
}

// Shown masks each copy's password, in its target, its URL and the events
// that name them, and leaves the detail it was given as it was: Storing
// matches copies by what the inventory holds.
func TestShownMasksCopies(t *testing.T) {
	t.Parallel()
	target, url := "http://ingest:s3cret@storage.example.org/s", "http://ingest:s3cret@storage.example.org/s/objects/ark"
	d := ObjectDetail{Versions: []Record{{Replicas: []Replica{{Target: target, URL: url}},
		Events: []Event{{Type: EventReplication, Detail: "copy 1 of 1: version 1 at " + url}, {Type: EventIngestion, Detail: "version 1"}}}}}
	shown := d.Shown()
	v := shown.Versions[0]
	if v.Replicas[0].Target != "http://ingest:xxxxx@storage.example.org/s" || v.Replicas[0].URL != "http://ingest:xxxxx@storage.example.org/s/objects/ark" ||
		v.Events[0].Detail != "copy 1 of 1: version 1 at http://ingest:xxxxx@storage.example.org/s/objects/ark" || v.Events[1].Detail != "version 1" {
		t.Errorf("Shown: %+v", v)
	}
	if d.Versions[0].Replicas[0].Target != target || d.Versions[0].Events[0].Detail != "copy 1 of 1: version 1 at "+url {
		t.Errorf("Shown changed the detail it was given: %+v", d.Versions[0])
	}
}
