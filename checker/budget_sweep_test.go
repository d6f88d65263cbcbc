package checker

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/lostgen"
	"github.com/stretchr/testify/require"
)

// TestBudgetCeilingStopsSweep: the linearizable property says which of
// its budget (CPU time) or its wall-time ceiling stopped the sweep, in
// its detail and in Search.
func TestBudgetCeilingStopsSweep(t *testing.T) {
	h, _, err := lostgen.GenerateHistory(lostgen.Config{Ops: 100_000, Clients: 50, Lost: 0.05, Seed: 1})
	require.NoError(t, err)
	f := newFacts(h)
	defer func(c int) { wallCeiling = c }(wallCeiling)
	for _, tc := range []struct {
		name    string
		ceiling int // in budgets
		out     string
		detail  string
	}{
		// (Far above the budget: a loaded machine must not reach it.)
		{"cpu", 1000, "cpu-budget", "the lock sweep ran out of its budget (5ms of CPU) at "},
		// (The thread gets at most the wall time: the ceiling comes first.)
		{"wall", 1, "wall-ceiling", "the lock sweep ran out of its wall-time ceiling (5ms, 1 times its budget of 5ms of CPU, after "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wallCeiling = tc.ceiling
			opts := DefaultOptions()
			opts.SearchBudget = 5 * time.Millisecond
			opts.PorcupineMaxOps = 1 // (no fallback)
			p, _ := checkLinearizable(f, opts)
			require.Equal(t, Unknown, p.Status, p.Detail)
			require.True(t, p.Search.OutOfTime)
			require.Equal(t, tc.out, p.Search.OutOf)
			require.Equal(t, int64(5*time.Millisecond), p.Search.BudgetNs)
			require.True(t, strings.HasPrefix(p.Detail, tc.detail), p.Detail)
		})
	}
}

// TestBudgetUnderLoad: a check beside busy goroutines (four per P, so it
// gets at most 2/9 of the CPU it would alone) still decides a history
// whose sweep needs a fraction of a second of CPU, with a budget of twice
// that: the wall time it takes is longer than the budget, which a wall-time
// budget would have blown. The same verdict as without the load.
func TestBudgetUnderLoad(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no thread CPU clock here: budgets count wall time")
	}
	// About 0.3 s of CPU for the sweep (10 times slower with -race).
	cfg := lostgen.Config{Ops: 300_000, Clients: 50, Lost: 0.05, Seed: 3}
	if raceEnabled {
		cfg.Ops = 30_000
	}
	h, tr, err := lostgen.GenerateHistory(cfg)
	require.NoError(t, err)
	require.Equal(t, lostgen.Yes, tr.Linearizable)
	f := newFacts(h)
	// The CPU the sweep needs alone (the larger of two checks).
	var need time.Duration
	for range 2 {
		p, _ := checkLinearizable(f, DefaultOptions())
		require.Equal(t, Pass, p.Status, p.Detail)
		need = max(need, time.Duration(p.Search.CPUNs))
	}
	// (The ceiling is not what this tests: a machine already loaded by
	// others must not make the test fail.)
	defer func(c int) { wallCeiling = c }(wallCeiling)
	wallCeiling = 1000

	var stop atomic.Bool
	var wg sync.WaitGroup
	hogs := 4 * runtime.GOMAXPROCS(0)
	limit := time.AfterFunc(2*time.Minute, func() { stop.Store(true) }) // (bounded, whatever happens)
	defer limit.Stop()
	for range hogs {
		wg.Go(func() { burn(stop.Load) })
	}
	opts := DefaultOptions()
	opts.SearchBudget = 2 * need
	p, _ := checkLinearizableCtx(context.Background(), f, opts)
	stop.Store(true)
	wg.Wait()

	st := p.Search
	t.Logf("alone: %v of CPU; beside %d busy goroutines: %v of CPU in %v wall, budget %v: %s",
		need, hogs, time.Duration(st.CPUNs), time.Duration(st.WallNs), opts.SearchBudget, p.Detail)
	require.Equal(t, Pass, p.Status, p.Detail)
	require.False(t, st.OutOfTime)
	require.Less(t, st.CPUNs, int64(opts.SearchBudget))
	require.Greater(t, st.WallNs, int64(opts.SearchBudget), "the load did not stretch the check past its budget: the test shows nothing")
}
