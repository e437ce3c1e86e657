package cli_test

import (
	"strings"
	"testing"
)

// `submit --help` lists --set and the fields it gives: the README and
// submit's own refusals name it (`--set file_name=NAME`, `--set
// primary_id`), but it was hidden, so a new user found neither the flag nor
// how to give an object's local id or title from the CLI.
func TestSubmitHelpListsSet(t *testing.T) {
	t.Parallel()
	out, _, code := run(t, "", "submit", "--help")
	wantCode(t, code, 0)
	for _, want := range []string{"--set KEY=VALUE", "local_id", "primary_id", "file_name", "erc_what", "--set local_id="} {
		if !strings.Contains(out, want) {
			t.Errorf("submit --help lacks %q:\n%s", want, out)
		}
	}
}
