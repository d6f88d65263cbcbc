package checker

import (
	"slices"
	"time"
)

// Delta debugging (Zeller and Hildebrandt's ddmin) over a set of units,
// then a pass that removes units one at a time until none can go: the one
// minimiser behind both the lock sweep's witnesses (witness.go: lock
// operations that cannot all be placed) and the history-level witnesses
// (minimize_history.go: whole operations and faults of a history that still
// show an anomaly).
//
// shows(kept) says whether the units kept (a sorted subset of the units
// handed to minimize) still show what is being minimised; units that must
// stay (the anomaly's own operations, the blocker) are not handed to it at
// all, and the caller adds them to every candidate.

// minimized is what minimize found.
type minimized struct {
	kept []int32 // the units left, sorted
	// minimal: removing any one unit of kept makes shows false, each
	// removal tried; false when the deadline (or halt) cut the search
	// short, in which case kept still shows it (every step that removed
	// units had been tested), but a smaller set may exist.
	minimal bool
	tests   int // calls of shows
}

// minimize shrinks units (sorted) to a 1-minimal subset for which shows
// holds, assuming it holds for all of units (it is never called on them).
// It stops at deadline, or when halt (if not nil) returns true.
func minimize(units []int32, shows func(kept []int32) bool, deadline time.Time, halt func() bool) minimized {
	m := &minimizer{shows: shows, deadline: deadline, halt: halt}
	kept, done := m.ddmin(slices.Clone(units))
	if done {
		kept, done = m.oneMinimal(kept)
	}
	return minimized{kept: kept, minimal: done, tests: m.tests}
}

type minimizer struct {
	shows    func([]int32) bool
	deadline time.Time
	halt     func() bool
	tests    int
}

func (m *minimizer) over() bool {
	return time.Now().After(m.deadline) || (m.halt != nil && m.halt())
}

func (m *minimizer) try(kept []int32) bool {
	m.tests++
	return m.shows(kept)
}

// ddmin splits c into n chunks; keeps one chunk alone if that shows it
// (back to 2 chunks), else drops one chunk if the rest shows it (one chunk
// fewer), else doubles n, until n reaches the size of c. It returns false
// when it ran out of time.
func (m *minimizer) ddmin(c []int32) ([]int32, bool) {
	if len(c) == 0 {
		return c, true
	}
	if m.over() {
		return c, false
	}
	if m.try(nil) {
		return nil, true
	}
	n := 2
	for len(c) >= 2 {
		n = min(n, len(c))
		reduced := false
		for i := 0; i < n && !reduced; i++ {
			if m.over() {
				return c, false
			}
			lo, hi := chunk(len(c), n, i)
			if n > 2 && m.try(c[lo:hi]) { // with 2 chunks, a chunk alone is the other's complement
				c, n, reduced = slices.Clone(c[lo:hi]), 2, true
			}
		}
		for i := 0; i < n && !reduced; i++ {
			if m.over() {
				return c, false
			}
			lo, hi := chunk(len(c), n, i)
			rest := slices.Concat(c[:lo], c[hi:])
			if m.try(rest) {
				c, n, reduced = rest, max(n-1, 2), true
			}
		}
		if !reduced {
			if n >= len(c) {
				break
			}
			n = min(2*n, len(c))
		}
	}
	return c, true
}

// chunk returns the bounds of the i-th of n near-equal chunks of size l.
func chunk(l, n, i int) (lo, hi int) {
	return i * l / n, (i + 1) * l / n
}

// oneMinimal removes single units, oldest first, until no removal shows
// it any more: each unit is tried again after any removal, since removing
// one unit may let another go. It returns false when it ran out of time.
func (m *minimizer) oneMinimal(c []int32) ([]int32, bool) {
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(c); {
			if m.over() {
				return c, false
			}
			rest := slices.Concat(c[:i], c[i+1:])
			if m.try(rest) {
				c, changed = rest, true
				continue
			}
			i++
		}
	}
	return c, true
}
