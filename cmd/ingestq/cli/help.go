package cli

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Examples of --help, by command path (as cmdPath gives it).
// They live here, in one place, rather than in each command's definition.
var examples = map[string][]string{
	"tree":       {"ingestq tree /jobs/states", "ingestq tree -o json /batches"},
	"ls":         {"ingestq ls batches --state failed", "ingestq ls jobs --batch bid0000000001"},
	"ls batches": {"ingestq ls batches", "ingestq ls batches --state failed -o json"},
	"ls jobs": {"ingestq ls jobs --state failed", "ingestq ls jobs --batch bid0000000001 -o json",
		"ingestq ls jobs --local-id demo-poems", "ingestq ls jobs --ark ark:/99999/fk4000001q",
		"ingestq ls jobs --stalled", "ingestq ls jobs --stalled --stalled-after 30m,downloading=4h"},
	"show": {"ingestq show jid0000000003", "ingestq show bid0000000001 -o json",
		"ingestq show 2f1e5c4a-1b3d-4c6e-9a7b-0d8e6f5a4b3c", "ingestq show ark:/99999/fk4000001q"},
	"object": {"ingestq object ark:/99999/fk4000001q", "ingestq object --profile demo demo-poems -o json",
		"ingestq object --data-dir /var/lib/ingestq ark:/99999/fk4000001q",
		"ingestq object --inventory postgres://ingest@db/ingestq ark:/99999/fk4000001q"},
	"audit": {"ingestq audit", "ingestq audit --fixity", "ingestq audit ark:/99999/fk4000001q",
		"ingestq audit --after ark:/99999/fk4000001q --limit 1000", "ingestq audit -o json > audit.ndjson"},
	"check": {"ingestq check", "ingestq check -o json"},

	"hold":               {"ingestq hold job jid0000000012", "ingestq hold collection demo", "ingestq hold queue"},
	"hold job":           {"ingestq hold job jid0000000012"},
	"hold batch":         {"ingestq hold batch bid0000000001"},
	"hold collection":    {"ingestq hold collection demo"},
	"hold queue":         {"ingestq hold queue", "ingestq hold queue access-small"},
	"release":            {"ingestq release job jid0000000012", "ingestq release collection demo", "ingestq release queue"},
	"release job":        {"ingestq release job jid0000000012"},
	"release batch":      {"ingestq release batch bid0000000001"},
	"release collection": {"ingestq release collection demo"},
	"release queue":      {"ingestq release queue", "ingestq release queue access-large"},
	"requeue":            {"ingestq requeue jid0000000012"},
	"fail":               {`ingestq fail jid0000000012 --message "the depositor withdrew it"`, "ingestq fail jid0000000012 --force"},
	"delete":             {"ingestq delete jid0000000012", "ingestq delete bid0000000001"},
	"report":             {"ingestq report bid0000000001"},
	"cancel":             {"ingestq cancel bid0000000001", "ingestq cancel -o json 2f1e5c4a-1b3d-4c6e-9a7b-0d8e6f5a4b3c"},
	"cleanup":            {"ingestq cleanup --dry-run", "ingestq cleanup", "ingestq cleanup --older-than 7d", "ingestq cleanup --older-than 0"},
	"hosts":              {"ingestq hosts", "ingestq hosts -o json"},
	"hosts forget":       {"ingestq hosts forget ingest-03"},
	"holds":              {"ingestq holds", "ingestq holds -o json"},
	"demo":               {"ingestq demo", "make demo", "ingestq demo --dir /tmp/ingestq-demo --keep"},
	"completion":         {"ingestq completion bash > /etc/bash_completion.d/ingestq", "source <(ingestq completion bash)", "ingestq completion fish > ~/.config/fish/completions/ingestq.fish"},

	"serve": {"ingestq serve",
		"ingestq serve --profiles /etc/ingestq/profiles --data-dir /var/lib/ingestq",
		"ingestq serve --zk zk1:2181,zk2:2181,zk3:2181 --nats-cluster 0.0.0.0:6222",
		"ingestq serve --zk zk1:2181,zk2:2181,zk3:2181 --nats nats://nats1:4222",
		"ingestq serve --states pending,estimating,provisioning,downloading,processing,notify,intake --http 0.0.0.0:8080",
		"ingestq serve --pipeline passthrough"},
	"submit": {"ingestq submit --profile demo --wait http://127.0.0.1:8000/batch.checkm",
		"ingestq submit --profile scans --type file ./report.pdf   # a profile with allow_local_files",
		"ingestq submit --profile demo --set local_id=maps-5 --set 'erc_what=Survey sheet 5' https://example.org/sheet-5.tif",
		"ingestq submit -o json --profile demo https://example.org/deposit.zip",
		"ingestq submit --profile demo --wait passthrough:100"},
	"events":      {"ingestq events tail", "ingestq events replay --since 1d"},
	"events tail": {"ingestq events tail", "ingestq events tail 'ingestq.job.failed.>'", "ingestq events tail -o json 'ingestq.batch.>'"},
	"events replay": {"ingestq events replay --since 1d", "ingestq events replay --batch bid0000000001", "ingestq events replay --job jid0000000012 -o json",
		"ingestq events replay --access small/qid0000000003"},

	"access": {"ingestq access request ark:/99999/fk4000001q --wait", "ingestq access ls --state failed"},
	"access request": {"ingestq access request ark:/99999/fk4000001q --wait",
		"ingestq access request ark:/99999/fk4000001q --version 2 --format tar.gz",
		"ingestq access request ark:/99999/fk4000001q --file producer/a.pdf --file producer/b.pdf",
		"ingestq access request --inventory postgres://ingest@db/ingestq ark:/99999/fk4000001q"},
	"access ls":      {"ingestq access ls", "ingestq access ls --state failed -o json"},
	"access show":    {"ingestq access show small/qid0000000003", "ingestq access show qid0000000003 -o json"},
	"access requeue": {"ingestq access requeue large/qid0000000001"},
	"access delete":  {"ingestq access delete small/qid0000000003"},
}

// addExamples sets the Examples of every command that has some.
func addExamples(cmd *cobra.Command) {
	if ex, ok := examples[cmdPath(cmd)]; ok {
		cmd.Example = "  " + strings.Join(ex, "\n  ")
	}
	for _, c := range cmd.Commands() {
		addExamples(c)
	}
}

// didYouMean is "; did you mean X?" when typed is close to a subcommand of
// cmd, else "".
func didYouMean(cmd *cobra.Command, typed string) string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, which it sets only on its own path
	}
	s := cmd.SuggestionsFor(typed)
	if len(s) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(s, " or ") + "?"
}

// version is this build's version: set by `make build` (-ldflags -X), else
// the module version Go stamped into the binary.
var version string

// versionText is what --version prints after "ingestq version ": the
// version, and the commit and Go release it was built from.
func versionText() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return cmp.Or(version, "unknown")
	}
	v := cmp.Or(version, info.Main.Version)
	var commit, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value[:min(12, len(s.Value))]
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if commit == "" {
		return fmt.Sprintf("%s (%s)", cmp.Or(v, "unknown"), info.GoVersion)
	}
	return fmt.Sprintf("%s (commit %s%s, %s)", cmp.Or(v, "unknown"), commit, modified, info.GoVersion)
}
