package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/reports"
)

// TestCheckWritesWitnesses: `locktest check` on an unsafe run writes each
// anomaly's witness, results.json names it, and `locktest check` on the
// witness's directory exits 1 (unsafe) with the same kind, cause and
// clients.
func TestCheckWritesWitnesses(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "checker", "testdata", "bad-lease-pause.jsonl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "history.jsonl"), src, 0o644))

	r := run(t, nil, "check", "--quiet", dir)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "witnesses: 2 of 2 anomalies minimised")
	res, err := reports.ReadResultsJSON(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	require.Len(t, res.Anomalies, 2)
	for _, a := range res.Anomalies {
		require.NotEmpty(t, a.Witness)
		w := run(t, nil, "check", "--quiet", filepath.Join(dir, filepath.Dir(a.Witness)))
		require.Equal(t, 1, w.code, "the witness of a %s is unsafe: %s", a.Kind, w.stdout)
		wres, err := reports.ReadResultsJSON(filepath.Join(dir, filepath.Dir(a.Witness), "results.json"))
		require.NoError(t, err)
		require.Len(t, wres.Anomalies, 1, "%s: the witness shows that one anomaly: %s", a.Kind, w.stdout)
		b := wres.Anomalies[0]
		require.Equal(t, []any{a.Kind, a.Cause, a.Clients, a.Severity}, []any{b.Kind, b.Cause, b.Clients, b.Severity})
		require.NotContains(t, w.stdout, "witnesses:", "a witness is not minimised again")
	}
}
