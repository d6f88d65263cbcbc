package harness_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// With StopEarly the run ends at the first certain violation, long before
// its time limit, and says so.
func TestStopEarly(t *testing.T) {
	t.Parallel()
	needServer(t)
	slot(t, 5*time.Second) // stops at the first violation
	o := baseOptions(t, "redis-lua", "pause", 11)
	o.TimeLimit, o.StopEarly = 30*time.Second, true
	t0 := time.Now()
	out, err := Run(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, checker.Unsafe, out.Result.Verdict, out.Result.Why)
	require.NotNil(t, out.Detected)
	require.True(t, out.Detected.Stopped)
	require.Less(t, time.Since(t0), 20*time.Second, "stopped early")
	h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
	require.NoError(t, err)
	require.Less(t, h.End, int64(20*time.Second))
	require.Contains(t, readFile(t, filepath.Join(out.Dir, "history.jsonl")), "stopped at the first violation")
	require.Contains(t, readFile(t, filepath.Join(out.Dir, "history.jsonl")), "online checker: a double-holder")
	assertNothingLeft(t, out.Dir)
}
