package checker

import (
	"slices"

	"github.com/locktest/locktest/history"
)

// Held windows: intervals during which the lock is surely held (by some
// client) in every linearization of a history. A failed ("held") acquire
// whose window [call, return] overlaps one can be placed there, without
// effect, in every linearization of the other operations, so the history
// is linearizable with it exactly when it is without it: both engines drop
// such acquires, which with many clients are most of the operations.
//
// A window is the open interval from the return of a client's successful
// acquire to the next invocation of a release by the same client (whatever
// its outcome), cut, with a lease, at the earliest time the lease may have
// expired (the acquire's invocation + TTL - slack): in between, only that
// client's releases could free the lock, and nobody could take it over.
// There is no window when the client has an indeterminate release pending
// that could free it (called earlier, same owner or an unknown one), when
// another of its definite lock operations was still running at the start,
// or, for a reentrant lock, when it has an indeterminate acquire pending
// (which may have nested on an older grant whose lease expires earlier).

// window is an open interval (start, end) during which the lock is surely
// held.
type window struct{ start, end int64 }

// clientWindow is the window tracker's state for one client.
type clientWindow struct {
	open      bool
	start     int64
	cap       int64 // the earliest expiry: the window ends there at the latest
	lastRet   int64 // latest return of its definite lock operations so far
	anyIR     bool  // an indeterminate release with an unknown owner is pending
	irOwners  []int32
	pendingIA bool // an indeterminate acquire is pending
}

// windowTracker finds the held windows from the lock operations, fed in
// the order of the sweep (or per client in order of invocation).
type windowTracker struct {
	m       lockModel
	clients []clientWindow // by client number (dense)
	sparse  map[int32]*clientWindow
	keep    bool     // keep the closed windows (heldWindows)
	closed  []window // with keep
	maxEnd  int64    // latest end of a closed window
}

func newWindowTracker(m lockModel) *windowTracker {
	return &windowTracker{m: m, maxEnd: -history.Never}
}

func (w *windowTracker) client(c int32) *clientWindow {
	if c >= 0 && c < 1<<16 {
		for int(c) >= len(w.clients) {
			w.clients = append(w.clients, clientWindow{lastRet: -history.Never})
		}
		return &w.clients[c]
	}
	if w.sparse == nil {
		w.sparse = map[int32]*clientWindow{}
	}
	cw, ok := w.sparse[c]
	if !ok {
		cw = &clientWindow{lastRet: -history.Never}
		w.sparse[c] = cw
	}
	return cw
}

// call notes op's invocation.
func (w *windowTracker) call(op *lockOp) {
	cw := w.client(op.client)
	if op.kind == linRelease {
		if cw.open {
			w.closeAt(cw, op.call)
		}
		if op.out == outUnknown {
			if op.owner == 0 {
				cw.anyIR = true
			} else if !slices.Contains(cw.irOwners, op.owner) {
				cw.irOwners = append(cw.irOwners, op.owner)
			}
		}
	} else if op.out == outUnknown {
		cw.pendingIA = true
	}
}

// ret notes the return of definite op.
func (w *windowTracker) ret(op *lockOp) {
	cw := w.client(op.client)
	if op.kind == linAcquire && op.out == outOK && !(w.m.rw && op.shared) && !cw.open && w.startable(cw, op) {
		cw.open, cw.start, cw.cap = true, op.ret, history.Never
		if w.m.lease {
			cw.cap = satAdd(op.call, w.m.life())
		}
	}
	cw.lastRet = max(cw.lastRet, op.ret)
}

func (w *windowTracker) startable(cw *clientWindow, op *lockOp) bool {
	switch {
	case cw.lastRet >= op.call:
		return false // another of its operations ran concurrently (intervals are closed)
	case cw.anyIR:
		return false
	case op.owner == 0 && len(cw.irOwners) > 0:
		return false
	case slices.Contains(cw.irOwners, op.owner):
		return false
	case w.m.reentrant && cw.pendingIA:
		return false
	}
	return true
}

func (w *windowTracker) closeAt(cw *clientWindow, t int64) {
	cw.open = false
	if end := min(t, cw.cap); end > cw.start {
		if w.keep {
			w.closed = append(w.closed, window{cw.start, end})
		}
		w.maxEnd = max(w.maxEnd, end)
	}
}

// covers reports, at the return of a failed acquire with window [call,
// ret], whether a held window overlaps it. Every window that starts before
// ret has started by then; one still open ends after ret.
func (w *windowTracker) covers(call, ret int64) bool {
	if w.maxEnd > call {
		// Closed windows all started before now, and so before ret.
		return true
	}
	check := func(cw *clientWindow) bool { return cw.open && cw.start < ret && cw.cap > call }
	for i := range w.clients {
		if check(&w.clients[i]) {
			return true
		}
	}
	for _, cw := range w.sparse {
		if check(cw) {
			return true
		}
	}
	return false
}

// windowsOf returns the held windows of ops (in order of invocation),
// sorted by start and merged where they overlap (not where they merely
// touch: they are open).
func windowsOf(ops []lockOp, m lockModel) []window {
	w := newWindowTracker(m)
	w.keep = true
	// Per client, in order of invocation: a window opens at an acquire's
	// return and closes at the next invocation of a release by the same
	// client, which for a client with one operation at a time comes after.
	for k := range ops {
		op := &ops[k]
		w.call(op)
		if op.ret != history.Never {
			w.ret(op)
		}
	}
	for i := range w.clients {
		if cw := &w.clients[i]; cw.open {
			w.closeAt(cw, history.Never)
		}
	}
	for _, cw := range w.sparse {
		if cw.open {
			w.closeAt(cw, history.Never)
		}
	}
	ws := w.closed
	slices.SortFunc(ws, func(a, b window) int { return cmpInt64(a.start, b.start) })
	out := ws[:0]
	for _, x := range ws {
		if n := len(out); n > 0 && x.start < out[n-1].end {
			out[n-1].end = max(out[n-1].end, x.end)
			continue
		}
		out = append(out, x)
	}
	return out
}

// lockOps converts h's lock operations for the engines, in order of
// invocation, leaving out those they provably do not need (see lockOpOf).
func lockOps(h *history.History, ow *owners) []lockOp {
	ops := make([]lockOp, 0, len(h.Ops))
	for i := range h.Ops {
		if op, ok := lockOpOf(&h.Ops[i], ow); ok {
			ops = append(ops, op)
		}
	}
	return ops
}

// dropCovered removes, in place, the failed acquires that overlap one of
// windows, and returns the rest and how many it removed.
func dropCovered(ops []lockOp, windows []window) ([]lockOp, int) {
	out := ops[:0]
	dropped, w := 0, 0
	for k := range ops {
		op := ops[k]
		if op.out == outHeld {
			// Windows are disjoint and sorted, ops by call: skip the
			// windows that ended before this call.
			for w < len(windows) && windows[w].end <= op.call {
				w++
			}
			if w < len(windows) && windows[w].start < op.ret {
				dropped++
				continue
			}
		}
		out = append(out, op)
	}
	return out, dropped
}
