package checker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCheckContextCancelled: a check stopped before or during its search
// answers within a second, keeps what it decided, marks the rest
// interrupted, and is never safe. (Not parallel: it sets propertyDone.)
func TestCheckContextCancelled(t *testing.T) {
	// Issue 17's shape, on which the sweep searches for seconds.
	// (100k operations: since the beam, the sweep decides 10k in 0.1 s.)
	h, _ := lostShapeHistory(t, lostShape(1, 100_000, 50, 0.05, 0))
	defer func() { propertyDone = nil }()
	for _, during := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled time.Time
		propertyDone = nil
		if !during {
			cancel()
			cancelled = time.Now()
		} else {
			// Cancelled 20 ms after deadlock, the property before
			// linearizable, is decided: the linearizability search (it
			// takes seconds on this shape) is cut short.
			propertyDone = func(p Property) {
				if p.Name == "deadlock" {
					cancelled = time.Now().Add(20 * time.Millisecond)
					time.AfterFunc(20*time.Millisecond, cancel)
				}
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
					require.GreaterOrEqual(t, p.Millis, 15.0, "the search ran until the cancel")
				}
			}
		}
	}
}
