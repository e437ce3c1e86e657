package redact

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// hostile are locations each of the five redactions ingestq had before
// this package showed a secret of (see decisions), with what Location
// shows; secret is what must not show.
var hostile = []struct{ in, want, secret string }{
	// url.Parse refuses these: a space, a bad escape, a control character,
	// "#" or "/" in the password.
	{"postgres://u:p@ss word@db.example.org/inv", "postgres://u:xxxxx@db.example.org/inv", "ss word"},
	{"postgres://u:p%zzw@db.example.org/inv", "postgres://u:xxxxx@db.example.org/inv", "p%zzw"},
	{"http://u:p\x01w@store.example.org/x", "http://u:xxxxx@store.example.org/x", "p\x01w"},
	{"postgres://u:p#ss@db.example.org/inv", "postgres://u:xxxxx@db.example.org/inv", "p#ss"},
	{"postgres://u:p/ss@db.example.org/inv", "postgres://u:xxxxx@db.example.org/inv", "p/ss"},
	// url.Parse reads these, the password's start as a port.
	{"postgres://u:12/ss@db.example.org/inv", "postgres://u:xxxxx@db.example.org/inv", "12/ss"},
	{"postgres://u:?ss@db.example.org/inv", "postgres://u:xxxxx@db.example.org/inv", "?ss"},
	// libpq's key=value form, which no URL parse touches.
	{"host=db.example.org password=s3cret dbname=inv", "host=db.example.org password=xxxxx dbname=inv", "s3cret"},
	{`host=db password='a b\'c d' dbname=inv`, "host=db password=xxxxx dbname=inv", "b\\'c"},
	{"host = db password = s3cret sslpassword=k3y", "host = db password = xxxxx sslpassword=xxxxx", "s3cret"},
	{"dbname=inv password='unclosed s3cret", "dbname=inv password=xxxxx", "s3cret"},
	{"host=db stray 'word password=s3cret", "host=db stray 'word password=xxxxx", "s3cret"},
	{"host=db password=", "host=db password=xxxxx", "s3cret"},
	// A secret in the query: libpq reads ?password=, a presigned URL
	// carries its signature and session token.
	{"postgres://ingest@db/inv?sslmode=require&password=s3cret", "postgres://ingest@db/inv?sslmode=require&password=xxxxx", "s3cret"},
	{"s3://bucket/p?endpoint=https://s3.example.org&secret_key=s3cret", "s3://bucket/p?endpoint=https://s3.example.org&secret_key=xxxxx", "s3cret"},
	{"https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F2026&X-Amz-Signature=abcd12&X-Amz-Security-Token=tok9#top",
		"https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F2026&X-Amz-Signature=xxxxx&X-Amz-Security-Token=xxxxx#top", "abcd12"},
	// A NATS token is a user without a password.
	{"nats://s3cr3ttoken@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222", "s3cr3ttoken"},
	// Lists: each member; a comma inside a password stays in it.
	{"nats://a:pw1@h1:4222, nats://b:s3cret@h2:4222", "nats://a:xxxxx@h1:4222, nats://b:xxxxx@h2:4222", "s3cret"},
	{"nats://u:p,s3cret@h:4222,nats://h2:4222", "nats://u:xxxxx@h:4222,nats://h2:4222", "s3cret"},
	{"/var/lib/ocfl,https://u:s3cret@store.example.org/s", "/var/lib/ocfl,https://u:xxxxx@store.example.org/s", "s3cret"},
}

func TestLocationHostile(t *testing.T) {
	for _, c := range hostile {
		got := Location(c.in)
		if got != c.want || strings.Contains(got, c.secret) {
			t.Errorf("Location(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestLocationKeeps: what holds no secret is shown as it was written.
// (A URL url.Parse reads with a port and "@" in its path is the one kind
// that shows less than it could: https://h:8443/a@b as https://h:xxxxx@b.)
func TestLocationKeeps(t *testing.T) {
	for _, s := range []string{
		"", "/var/lib/ocfl", "ocfl", "file:///var/lib/ocfl", "127.0.0.1:2181,127.0.0.1:2182",
		"https://user@storage.example.org/s", "https://storage.example.org/a@b?x=1", "mailto:ops@example.org",
		"ops@example.org", "postgres://ingest@db.example.org:5433/inv?sslmode=verify-full&sslkey=/etc/k.pem",
		"host=db dbname=inv sslmode=require", "/var/lib/ocfl,s3://bucket/p?endpoint=https://s3.example.org",
		"https://storage.example.org/s?", "s3://bucket/p?endpoint=s3.example.org&&region=x;y",
	} {
		if got := Location(s); got != s {
			t.Errorf("Location(%q) = %q, want it as it was", s, got)
		}
	}
}

// TestLocationAsRedacted: for a URL url.Parse reads, Location shows what
// url.URL.Redacted shows, the form messages showed before.
func TestLocationAsRedacted(t *testing.T) {
	for _, s := range []string{
		"https://hook:pw@cb.example.org/done", "ftp://user:secret@example.org", "postgres://ingest:pw@db.example.org/inv",
		"http://user:pass@127.0.0.1:1/storage",
	} {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := Location(s), u.Redacted(); got != want {
			t.Errorf("Location(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestIn(t *testing.T) {
	for _, c := range hostile {
		_, parseErr := url.Parse(c.in)
		for _, text := range []string{
			fmt.Sprintf("inventory %s: out of reach", c.in),
			fmt.Sprintf("place: S3 URL: %v", parseErr), // url.Error quotes it
		} {
			if parseErr == nil && strings.HasPrefix(text, "place:") {
				continue
			}
			got := In(text, "unrelated", c.in)
			if strings.Contains(got, c.secret) || strings.Contains(got, fmt.Sprintf("%q", c.secret)) {
				t.Errorf("In(%q) = %q, shows %q", text, got, c.secret)
			}
		}
	}
	// A list's member is found alone; the rest of the text is kept.
	got := In(`connect to "nats://b:s3cret@h2:4222" refused`, "nats://a:pw@h1:4222,nats://b:s3cret@h2:4222")
	if want := `connect to "nats://b:xxxxx@h2:4222" refused`; got != want {
		t.Errorf("In, a list's member: %q, want %q", got, want)
	}
}

// FuzzLocation: a password put in a URL is masked, however url.Parse
// takes it; left out is a comma, which may start a list's next member.
func FuzzLocation(f *testing.F) {
	for _, c := range hostile {
		f.Add("postgres", "u", c.secret, "db.example.org/inv")
	}
	f.Fuzz(func(t *testing.T, name, user, password, rest string) {
		if password == "" || strings.Contains(password, ",") ||
			!scheme.MatchString(name) || strings.ContainsAny(user, ":@/?#,") {
			return
		}
		in := name + "://" + user + ":" + password + "@" + strings.ReplaceAll(rest, "@", "")
		if got, want := Location(in), name+"://"+user+":"+Mask+"@"; !strings.HasPrefix(got, want) {
			t.Errorf("Location(%q) = %q, want it to start %q", in, got, want)
		}
	})
}

// FuzzConnString: a password in a key=value connection string, bare or
// quoted as libpq quotes it, is masked and the rest kept.
func FuzzConnString(f *testing.F) {
	f.Add("s3cret", "host=db")
	f.Add(`a b'c\d`, "host = db port=5432")
	f.Fuzz(func(t *testing.T, password, before string) {
		if !keyValue.MatchString(before) || strings.ContainsAny(before, `'\`) || strings.HasSuffix(strings.TrimRight(before, spaces), "=") {
			return
		}
		quoted := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password) + "'"
		in := before + " password=" + quoted + " dbname=inv"
		if got, want := Location(in), connString(before)+" password="+Mask+" dbname=inv"; got != want {
			t.Errorf("Location(%q) = %q, want %q", in, got, want)
		}
	})
}

// URLs masks a URL's or a list's secrets as Location does, and keeps text
// of libpq's key=value form as written: a depositor's title or file name.
func TestURLsKeepsKeyValueText(t *testing.T) {
	for in, want := range map[string]string{
		"Key = Largo sketches":             "Key = Largo sketches",
		"pass=1 of 3.txt":                  "pass=1 of 3.txt",
		"https://u:pw@example.org/a?sig=s": "https://u:xxxxx@example.org/a?sig=xxxxx",
		"s3://b/p?secret_key=s,/srv/ocfl":  "s3://b/p?secret_key=xxxxx,/srv/ocfl",
		"host=db password=s":               "host=db password=s",
	} {
		if got := URLs(in); got != want {
			t.Errorf("URLs(%q) = %q, want %q", in, got, want)
		}
	}
}
