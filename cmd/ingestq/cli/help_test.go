package cli_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// nowhere is a ZooKeeper address where nothing listens: none of these
// commands may need one.
var nowhere = []string{"--zk", "127.0.0.1:1", "--connect-timeout", "50ms"}

// A mistyped command gets cobra's suggestion, on the one error line.
func TestTypoSuggestions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sumbit"}, `unknown command "sumbit"; did you mean submit?`},
		{[]string{"lss"}, `unknown command "lss"; did you mean ls?`},
		{[]string{"ls", "jbos"}, `ls: unknown "jbos"; did you mean jobs? (one of: batches, jobs)`},
		{[]string{"hold", "jbo", "jid0000000001"}, `hold: unknown "jbo"; did you mean job?`},
		{[]string{"events", "tial"}, `events: unknown "tial"; did you mean tail?`},
	} {
		_, stderr, code := runEnv(t, nil, slices.Concat(nowhere, c.args)...)
		wantCode(t, code, 2)
		wantErrLine(t, stderr, c.want)
	}
	_, stderr, _ := runEnv(t, nil, slices.Concat(nowhere, []string{"frobnicate"})...)
	if strings.Contains(stderr, "did you mean") {
		t.Errorf("a suggestion for a word close to no command: %q", stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--version", "-v", "version"} {
		out, stderr, code := runEnv(t, nil, slices.Concat(nowhere, []string{flag})...)
		wantCode(t, code, 0)
		if !strings.HasPrefix(out, "ingestq version ") || !strings.Contains(out, runtime.Version()) || stderr != "" {
			t.Errorf("%s: stdout %q, stderr %q; want the version and the Go release", flag, out, stderr)
		}
	}
}

// Shell completion is cobra's, listed in --help.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "# bash completion V2 for ingestq", "zsh": "#compdef ingestq",
		"fish": "complete -c ingestq"} {
		out, _, code := runEnv(t, nil, slices.Concat(nowhere, []string{"completion", shell})...)
		wantCode(t, code, 0)
		if !strings.Contains(out, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}
	out, _, code := runEnv(t, nil, "--help")
	wantCode(t, code, 0)
	if !strings.Contains(out, "\n  completion ") {
		t.Errorf("--help does not list completion")
	}
}

// Every command's --help shows examples (the README says so).
func TestHelpExamples(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"submit", "ls", "ls jobs", "ls batches", "show", "hold", "hold batch", "release",
		"release job", "requeue", "fail", "delete", "report", "events", "events tail", "events replay", "serve",
		"tree", "check", "audit", "cleanup", "hosts", "holds", "object", "access", "access request", "access ls", "access show",
		"access requeue", "access delete", "demo", "completion", "cancel", "hold job", "hold collection", "hold queue",
		"release batch", "release collection", "release queue"} {
		out, _, code := runEnv(t, nil, append(strings.Fields(path), "--help")...)
		wantCode(t, code, 0)
		if !strings.Contains(out, "\nExamples:\n  ingestq "+path+" ") && !strings.Contains(out, "\nExamples:\n  ingestq "+path+"\n") {
			t.Errorf("%s --help has no examples of it", path)
		}
	}
	out, _, _ := runEnv(t, nil, "submit", "--help")
	if !strings.Contains(out, "passthrough:N") {
		t.Errorf("submit --help does not explain passthrough:N")
	}
	// The built-in demo profile takes no local file: an example that
	// submits one under it is refused as written.
	if regexp.MustCompile(`ingestq submit .*--profile demo .*\./`).MatchString(out) {
		t.Errorf("submit --help submits a local file under the demo profile, which refuses it:\n%s", out)
	}
	out, _, _ = runEnv(t, nil, "serve", "--help")
	if !strings.Contains(out, "passthrough:N") {
		t.Errorf("serve --help does not explain passthrough:N")
	}
}

// Every INGESTQ_* variable the CLI reads is named in the root's --help
// (its Environment paragraph) and in the README; a command's own --help
// names those of its flags too. The root's left out INGESTQ_NATS,
// INGESTQ_API and INGESTQ_API_TOKEN, which no flag's default shows.
func TestEveryVariableIsDocumented(t *testing.T) {
	t.Parallel()
	read := variablesRead(t)
	help, _, code := runEnv(t, nil, "--help")
	wantCode(t, code, 0)
	_, env, _ := strings.Cut(help, "\nEnvironment")
	env, _, _ = strings.Cut(env, "\nUsage:")
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range slices.Sorted(maps.Keys(read)) {
		if !regexp.MustCompile(`\b` + v + `\b`).MatchString(env) {
			t.Errorf("--help's Environment paragraph does not name %s", v)
		}
		if !regexp.MustCompile(`\b` + v + `\b`).Match(readme) {
			t.Errorf("the README does not name %s", v)
		}
	}
}

// variablesRead are the INGESTQ_* variables the CLI's sources name.
func variablesRead(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"(INGESTQ_[A-Z_]+)"`).FindAllStringSubmatch(string(data), -1) {
			read[m[1]] = true
		}
	}
	if len(read) < 20 {
		t.Fatalf("found %d variables in the sources, want more: %v", len(read), read)
	}
	return read
}

// Every variable deploy/ingestq.env sets or shows in a comment is one the
// daemon reads: serve's own INGESTQ_* variables (a misspelt one would be
// ignored without a word), or one its S3 and PostgreSQL clients read. And
// the sample makes one event stream of its hosts (INGESTQ_NATS_CLUSTER set),
// names the admin token's variable and says what the root does to sharing
// Merritt's queue.
func TestDeploySampleSetsWhatServeReads(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../../deploy/ingestq.env")
	if err != nil {
		t.Fatal(err)
	}
	read := variablesRead(t)
	clients := map[string]bool{"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "PGPASSWORD": true}
	set := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#?([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(string(data), -1) {
		set[m[1]] = true
		if !read[m[1]] && !clients[m[1]] {
			t.Errorf("deploy/ingestq.env sets %s, which ingestq serve does not read", m[1])
		}
	}
	if len(set) < 10 {
		t.Fatalf("found %d variables in deploy/ingestq.env, want more: %v", len(set), set)
	}
	if !regexp.MustCompile(`(?m)^INGESTQ_NATS_CLUSTER=\S`).Match(data) {
		t.Errorf("deploy/ingestq.env sets no INGESTQ_NATS_CLUSTER: each host would record its events alone")
	}
	if !set["INGESTQ_ADMIN_TOKEN"] {
		t.Errorf("deploy/ingestq.env does not show INGESTQ_ADMIN_TOKEN, serve's admin token")
	}
	if !strings.Contains(string(data), "Merritt") {
		t.Errorf("deploy/ingestq.env does not say what its root does to a queue shared with Merritt's services")
	}
}

// A duration flag's default reads as the README writes it: 1h, not
// pflag's 1h0m0s; a zero default is not shown.
func TestHelpDurationsReadAsTheREADME(t *testing.T) {
	t.Parallel()
	for path, want := range map[string][]string{
		"check":   {"(default 1h)"},
		"cleanup": {"(default 1h)"},
		"object":  {"(default 1m)"},
		"audit":   {"(default 1m)"},
		"serve":   {"(default 24h)", "(default 168h)", "(default 1m)", "(default 10s)"},
	} {
		out, _, code := runEnv(t, nil, path, "--help")
		wantCode(t, code, 0)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help does not say %s", path, w)
			}
		}
		if m := regexp.MustCompile(`\(default ([^)]*(h0m|m0s)|0s)\)`).FindString(out); m != "" {
			t.Errorf("%s --help says %s", path, m)
		}
	}
}

// Each command that takes an id names in its --help usage every kind of
// id it takes (a batch by its UUID too), and the README's line for it the
// same kinds.
func TestIDsTakenAreNamed(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(line string) string {
		line, _, _ = strings.Cut(line, "#") // the README's comment
		ids := regexp.MustCompile(`\b(JID|BID|UUID|ARK)\b`).FindAllString(line, -1)
		slices.Sort(ids)
		return strings.Join(slices.Compact(ids), ",")
	}
	for _, c := range []struct{ path, readme, want string }{
		{"show", "show", "ARK,BID,JID,UUID"},
		{"delete", "delete", "BID,JID,UUID"},
		{"hold", "hold|release", "BID,JID,UUID"},
		{"release", "hold|release", "BID,JID,UUID"},
		{"cancel", "cancel", "BID,UUID"},
		{"report", "report", "BID,UUID"},
		{"requeue", "requeue", "JID"},
		{"fail", "fail", "JID"},
		{"events replay", "events replay", "BID,JID,UUID"},
	} {
		out, _, code := runEnv(t, nil, append(strings.Fields(c.path), "--help")...)
		wantCode(t, code, 0)
		_, usage, _ := strings.Cut(out, "\nUsage:\n  ")
		usage, _, _ = strings.Cut(usage, "\n")
		if got := kinds(usage); got != c.want {
			t.Errorf("%s --help's usage %q names %s, want %s", c.path, usage, got, c.want)
		}
		var line string // the README's first line of the command
		for _, l := range strings.Split(string(readme), "\n") {
			if strings.HasPrefix(l, "ingestq "+c.readme+" ") {
				line = l
				break
			}
		}
		if got := kinds(line); got != c.want {
			t.Errorf("the README's %q names %s, want %s", line, got, c.want)
		}
	}
}

// A secret given by its variable (the NATS token, the SMTP password, a
// password or key in a URL: the inventory's, a storage service's, the
// API's, the access packages' S3) is not printed as its flag's default in
// any help, and the variable still sets it (serve's embedded NATS then asks
// for it: here only its help). A URL's other parts still show.
func TestHelpShowsNoSecret(t *testing.T) {
	t.Parallel()
	env := map[string]string{"INGESTQ_NATS_TOKEN": "nats-secret-0123456789", "INGESTQ_SMTP_PASSWORD": "smtp-secret-0123456789",
		"INGESTQ_INVENTORY": "postgres://ingestq:inv-secret-0123456789@db/ingestq", "INGESTQ_STORAGE": "http://store:st-secret-0123456789@storage:8080/",
		"INGESTQ_API": "https://op:api-secret-0123456789@ingest1:8080/api/v1", "INGESTQ_ACCESS_TO": "s3://access/p?endpoint=s3:9000&secret_key=key-secret-0123456789"}
	shown := map[string][]string{"serve": {`(default "postgres://ingestq:xxxxx@db/ingestq")`, `(default "http://store:xxxxx@storage:8080/")`,
		`(default "s3://access/p?endpoint=s3:9000&secret_key=xxxxx")`}, "object": {`(default "https://op:xxxxx@ingest1:8080/api/v1")`}}
	for _, args := range [][]string{{"--help"}, {"audit", "--help"}, {"events", "tail", "--help"}, {"serve", "--help"}, {"demo", "--help"},
		{"object", "--help"}, {"access", "request", "--help"}} {
		stdout, stderr, code := runEnv(t, env, slices.Concat(nowhere, args)...)
		wantCode(t, code, 0)
		if i := strings.Index(stdout+stderr, "secret-0123456789"); i >= 0 { // each secret's end
			t.Errorf("ingestq %s prints a secret: …%s", strings.Join(args, " "), (stdout + stderr)[max(0, i-40):i+17])
		}
		for _, want := range shown[args[0]] {
			if !strings.Contains(stdout, want) {
				t.Errorf("ingestq %s --help lacks %s", args[0], want)
			}
		}
		if args[0] == "serve" && !strings.Contains(stdout, "--smtp-password") {
			t.Errorf("ingestq serve --help has no --smtp-password line")
		}
	}
}
