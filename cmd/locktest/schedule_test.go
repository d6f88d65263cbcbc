package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A bad --schedule file ends the run with one line and exit 2, before
// anything starts or is recorded.
func TestScheduleBadFiles(t *testing.T) {
	store := t.TempDir()
	dir := t.TempDir()
	entry := func(e string) string { return `{"version":1,"seed":1,"replayed_from":"","faults":[` + e + `]}` }
	cases := []struct {
		name, text string
		extra      []string
		want       string
	}{
		{"missing file", "", nil, "no such file"},
		{"unknown nemesis", entry(`{"nemesis":"meteor","trigger":{"after_grant":1},"target":"holder","length":"1s"}`), nil, `unknown nemesis "meteor"`},
		{"bad duration", entry(`{"nemesis":"kill","trigger":{"after_grant":1},"target":"granters","length":"1 sec"}`), nil, `length "1 sec"`},
		{"unknown trigger", entry(`{"nemesis":"kill","trigger":{"after_lunch":1},"target":"granters","length":"1s"}`), nil, `unknown trigger "after_lunch"`},
		{"not a schedule", "[1,2,3]", nil, "cannot unmarshal"},
		{"nemesis not named", entry(`{"nemesis":"kill","trigger":{"after_grant":1},"target":"granters","length":"1s"}`), []string{"--nemesis", "pause"}, "holds kill faults, which --nemesis pause does not name"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if tc.text != "" {
				require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o644))
			}
			args := append([]string{"run", "--lock", "redis-lua", "--store", store, "--schedule", path}, tc.extra...)
			r := run(t, nil, args...)
			require.Equal(t, 2, r.code, "case %d stderr: %s", i, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			require.Len(t, lines, 1, "one clear line, got: %q", r.stderr)
			require.Contains(t, lines[0], tc.want)
			require.Contains(t, lines[0], "--schedule")
		})
	}
	entries, _ := os.ReadDir(store)
	require.Empty(t, entries, "a bad schedule creates no run directory")
}
