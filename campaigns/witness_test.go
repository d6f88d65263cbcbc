package campaigns_test

import (
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
