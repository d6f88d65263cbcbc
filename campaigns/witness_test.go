package campaigns_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/reports"
)

// TestFromRunsSkipsWitnesses: a run's witnesses (witness-<n>/history.jsonl,
// written by its check) are no runs: `locktest report STORE` run again
// lists the same runs as the first time.
func TestFromRunsSkipsWitnesses(t *testing.T) {
	dir := copyStore(t)
	check := func(d string) (*checker.Result, error) { return harness.CheckDir(d, nil, true) }
	first, err := campaigns.FromRuns(dir, check)
	require.NoError(t, err)
	ws, err := filepath.Glob(filepath.Join(dir, "*", "*", "*", "witness-*", "history.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, ws, "the unsafe stored run has witnesses now")
	second, err := campaigns.FromRuns(dir, check)
	require.NoError(t, err)
	require.Equal(t, runDirs(first), runDirs(second))
	require.Len(t, runDirs(second), 3)
}

func runDirs(c *reports.Campaign) []string {
	var out []string
	for _, cell := range c.Cells {
		for _, r := range cell.Runs {
			out = append(out, r.Dir)
		}
	}
	return out
}

// TestFromRunsSkipsShrinks: a shrink's directory inside a run (locktest
// shrink RUN_DIR writes RUN_DIR/shrink, its candidates' runs below it)
// adds no runs to the store's matrix.
func TestFromRunsSkipsShrinks(t *testing.T) {
	dir := copyStore(t)
	check := func(d string) (*checker.Result, error) { return harness.CheckDir(d, nil, true) }
	first, err := campaigns.FromRuns(dir, check)
	require.NoError(t, err)
	runs := runDirs(first)
	require.NotEmpty(t, runs)
	run := filepath.Join(dir, runs[0]) // run directories are named relative to the store
	sh := filepath.Join(run, "shrink")
	cand := filepath.Join(sh, "store", "redis-lua", "pause", "20260101T000000.000")
	require.NoError(t, os.MkdirAll(cand, 0o755))
	b, err := os.ReadFile(filepath.Join(run, "history.jsonl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(cand, "history.jsonl"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sh, "shrink.json"), []byte("{}"), 0o644))
	second, err := campaigns.FromRuns(dir, check)
	require.NoError(t, err)
	require.Equal(t, runs, runDirs(second))
}
