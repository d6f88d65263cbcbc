package checker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCheckContextCancelled: a check stopped before or during its search
// answers within a second, keeps what it decided, marks the rest
// interrupted, and is never safe. (Not parallel: it sets searchStarted.)
func TestCheckContextCancelled(t *testing.T) {
	// Issue 17's shape, on which the sweep searches for seconds.
	// (100k operations: since the beam, the sweep decides 10k in 0.1 s.)
	h, _ := lostShapeHistory(t, lostShape(1, 100_000, 50, 0.05, 0))
	defer func() { searchStarted = nil }()
	for _, during := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled time.Time
		searchStarted = nil
		if !during {
			cancel()
			cancelled = time.Now()
		} else {
			// Cancelled 20 ms into the linearizability search (it takes
			// seconds on this shape): the search is cut short.
			searchStarted = func() {
				cancelled = time.Now().Add(20 * time.Millisecond)
				time.AfterFunc(20*time.Millisecond, cancel)
			}
		}
		opts := DefaultOptions()
		opts.SearchBudget = time.Minute
		r := CheckContext(ctx, h, opts)
		cancel()
		require.False(t, cancelled.IsZero(), "cancelled")
		took := time.Since(cancelled)
		require.True(t, r.CheckInterrupted)
		require.NotEqual(t, Safe, r.Verdict, r.Why)
		require.Less(t, took, 1500*time.Millisecond, "answered %v after the cancel", took)
		interrupted := 0
		for _, p := range r.Properties {
			if p.Status == Interrupted {
				interrupted++
			}
		}
		require.Positive(t, interrupted)
		if !during {
			require.Equal(t, len(r.Properties), interrupted, "nothing decided after a cancel before the start")
		} else {
			requireProperty(t, r, string(KindDoubleHolder), Pass) // kept
			requireProperty(t, r, "linearizable", Interrupted)
			for _, p := range r.Properties {
				if p.Name == "linearizable" {
					require.NotNil(t, p.Search)
					require.Equal(t, "interrupted", p.Search.OutOf, "the search was stopped by the cancel")
					t.Logf("the search read %d returns before the cancel", p.Search.Forced+p.Search.Searched)
				}
			}
		}
	}
}
