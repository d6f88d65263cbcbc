package harness

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/lostgen"
)

// TestCheckDirContextInterrupted: a check stopped before or while it
// searches still writes results.json, with what it decided and the rest
// "interrupted", never safe; one not stopped decides as before.
func TestCheckDirContextInterrupted(t *testing.T) {
	dir := t.TempDir()
	_, err := lostgen.WriteDir(dir, lostgen.Config{Ops: 2000, Clients: 50, Lost: 0.05, Double: 2, Mix: lostgen.MixCertain, Seed: 3})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	res, err := CheckDirContext(ctx, dir, nil, true)
	require.NoError(t, err)
	// Every property below says interrupted: the search never ran. The
	// bound only catches a check that does not stop (the load, check and
	// write of 2,000 operations took 1.2 s under -race beside two CPU hogs).
	require.Less(t, time.Since(start), 10*time.Second)
	require.True(t, res.CheckInterrupted)
	require.NotEqual(t, checker.Safe, res.Verdict)
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var stored checker.Result
	require.NoError(t, json.Unmarshal(b, &stored))
	require.True(t, stored.CheckInterrupted)
	for _, p := range stored.Properties {
		require.Equal(t, checker.Interrupted, p.Status, p.Name)
	}

	res, err = CheckDirContext(context.Background(), dir, nil, true)
	require.NoError(t, err)
	require.False(t, res.CheckInterrupted)
	require.Equal(t, checker.Unsafe, res.Verdict, res.Why)
}

// A run whose check at the end was stopped is an interrupted run
// (Outcome.Interrupted: `locktest run` exits 130, a campaign runs its seed
// again on resume), though its workload ran to its time limit.
func TestFinishCheckInterrupted(t *testing.T) {
	dir := t.TempDir()
	_, err := lostgen.WriteDir(dir, lostgen.Config{Ops: 2000, Clients: 50, Lost: 0.05, Double: 2, Mix: lostgen.MixCertain, Seed: 3})
	require.NoError(t, err)
	r := &run{dir: dir, out: io.Discard, o: Options{Quiet: true}}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := r.finishContext(ctx, driven{})
	require.NoError(t, err)
	require.True(t, out.Result.CheckInterrupted)
	require.True(t, out.Interrupted)

	out, err = r.finishContext(context.Background(), driven{})
	require.NoError(t, err)
	require.False(t, out.Interrupted)
	require.Equal(t, checker.Unsafe, out.Result.Verdict, out.Result.Why)
}
