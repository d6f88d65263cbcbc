// Package sleep waits for a while unless a context ends first: the one
// wait every phase of a run (recipes, faults, workloads) uses between its
// steps.
package sleep

import (
	"context"
	"time"
)

// For waits d and returns true, or returns false as soon as ctx is done. A
// d of zero or less does not wait: it returns whether ctx is still live.
func For(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
