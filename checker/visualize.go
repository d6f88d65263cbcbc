package checker

import (
	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/history"
)

// Porcupine's visualization of a history (reports/linearization.go draws
// it) needs the model and the operations porcupine searches. A whole long
// history is too much for the verbose search and for a person to read, so
// PorcupineWindow cuts a window of it, soundly:
//
//   - It starts at a point where the lock was surely free: no lock
//     operation in flight, no indeterminate one before it, and a
//     successful release called after every successful acquire before it
//     had returned. Whatever happened before, the lock was free there in
//     every linearization, so the window searched from a free lock is
//     linearizable exactly when the rest of the history is (given that
//     the part before it is). Reentrant locks have no such point (the
//     depth is unknown): their windows start at the beginning.
//   - It ends at an invocation; the operations still running then are
//     made indeterminate (they may or may not have taken effect), which
//     only weakens the history, as the bisection of porcupine.go does.

// ViewOptions chooses the window of PorcupineWindow.
type ViewOptions struct {
	// MaxOps is the most lock operations in the window (default 1000).
	MaxOps int
	// FocusFrom and FocusTo: the window should cover the lock operations
	// called in [FocusFrom, FocusTo] (e.g. an anomaly's); FocusTo < 0: no
	// focus, the window is the start of the history.
	FocusFrom, FocusTo int64
	// Slack as in Options (default 5ms).
	Slack int64
}

// PorcupineView is a window of a history's lock operations as porcupine
// sees them, with the model to search and draw them.
type PorcupineView struct {
	Model porcupine.Model
	// Ops are porcupine's operations: ClientId is the client minus one,
	// Metadata the *history.Operation (in the history PorcupineWindow was
	// given) each comes from.
	Ops []porcupine.Operation
	// LockOps is the number of lock operations the engines read in the
	// whole history; Dropped the failed acquires left out because they
	// fall inside a sure hold (they fit anywhere there).
	LockOps, Dropped int
	// From and To bound the window: From is 0 or the invocation of its
	// first operation, To the invocation of the first operation after it
	// (history.Never when it runs to the end).
	From, To int64
	// Whole: the window is the whole history (less Dropped).
	Whole bool
	// Focused: the window covers the focus; false when no window of at
	// most MaxOps operations that starts on a free lock does, and it is
	// then the start of the history.
	Focused bool
	// Cut counts the operations still running at To, made indeterminate.
	Cut int
	// Skipped says why there is no view (no Ops), or is empty.
	Skipped string
}

// PorcupineWindow returns the lock operations of h that porcupine would
// search, within a window of at most o.MaxOps operations (see above).
func PorcupineWindow(h *history.History, o ViewOptions) PorcupineView {
	if o.MaxOps <= 0 {
		o.MaxOps = 1000
	}
	if o.Slack <= 0 {
		o.Slack = int64(DefaultOptions().Slack)
	}
	v := PorcupineView{To: history.Never}
	if h.Info.ReadWrite {
		v.Skipped = "read-write locks are not modelled yet"
		return v
	}
	ops, dropped, m := prepareLock(h, o.Slack)
	v.LockOps, v.Dropped = len(ops), dropped
	v.Model = m.porcupine(m.ow)
	if len(ops) == 0 {
		v.Skipped = "the history has no lock operations"
		return v
	}
	s, e := 0, len(ops)
	switch {
	case len(ops) <= o.MaxOps:
		v.Whole, v.Focused = true, true
	case o.FocusTo >= 0:
		if fs, fe, ok := focusWindow(ops, m, o); ok {
			s, e, v.Focused = fs, fe, true
			break
		}
		e = quietEnd(ops, o.MaxOps-o.MaxOps/10, o.MaxOps)
	default:
		e = quietEnd(ops, o.MaxOps-o.MaxOps/10, o.MaxOps)
	}
	if s > 0 {
		v.From = ops[s].call
	}
	if e < len(ops) {
		v.To = ops[e].call
	}
	win := make([]lockOp, e-s)
	copy(win, ops[s:e])
	v.Cut = cutAt(win, v.To)
	v.Ops = porcupineOps(win)
	for k := range v.Ops {
		if i := win[k].index; i >= 0 && int(i) < len(h.Ops) {
			v.Ops[k].Metadata = &h.Ops[i]
		}
	}
	return v
}

// focusWindow finds [s, e) covering the focus with at most o.MaxOps
// operations, starting at a free point, ending at a quiet one if it can.
func focusWindow(ops []lockOp, m lockModel, o ViewOptions) (int, int, bool) {
	if m.reentrant {
		return 0, 0, false
	}
	// fs: the first operation called at or after FocusFrom; fe: one past
	// the last called by FocusTo.
	fs, fe := len(ops), 0
	for k := range ops {
		if ops[k].call >= o.FocusFrom && k < fs {
			fs = k
		}
		if ops[k].call <= o.FocusTo {
			fe = k + 1
		}
	}
	if fe <= fs {
		fe = min(fs+1, len(ops))
	}
	if fe-fs > o.MaxOps {
		return 0, 0, false
	}
	// Some context after the focus, ending where nothing runs if possible.
	pad := min(o.MaxOps/10, o.MaxOps-(fe-fs))
	e := quietEnd(ops, fe, min(len(ops), fe+pad))
	free := freePoints(ops, fs)
	for s := max(0, e-o.MaxOps); s <= fs; s++ {
		if free[s] {
			return s, e, true
		}
	}
	return 0, 0, false
}

// freePoints marks, for s in [0, upto], whether the lock was surely free
// just before ops[s] was invoked (see the comment at the top).
func freePoints(ops []lockOp, upto int) []bool {
	free := make([]bool, upto+1)
	free[0] = true
	maxRet := int64(-1) << 62
	lastAcqRet := int64(-1) << 62 // latest return of a successful acquire
	lastRelCall := int64(-1) << 62
	acquired := false
	for s := 1; s <= upto && s < len(ops); s++ {
		p := &ops[s-1]
		maxRet = max(maxRet, p.ret)
		if p.out == outOK || p.out == outUnknown {
			switch p.kind {
			case linAcquire:
				acquired = true
				lastAcqRet = max(lastAcqRet, p.ret)
			case linRelease:
				if p.out == outOK {
					lastRelCall = max(lastRelCall, p.call)
				}
			}
		}
		quiet := maxRet < ops[s].call
		free[s] = quiet && (!acquired || lastRelCall > lastAcqRet)
	}
	return free
}

// quietEnd returns the last e in [from, to] such that no operation of
// ops[:e] is still running when ops[e] is invoked, or to when there is
// none (e == len(ops) is always quiet).
func quietEnd(ops []lockOp, from, to int) int {
	to = min(to, len(ops))
	if to == len(ops) {
		return to
	}
	maxRet := int64(-1) << 62
	best := -1
	for k := 0; k < to; k++ {
		maxRet = max(maxRet, ops[k].ret)
		if k+1 >= from && maxRet < ops[k+1].call {
			best = k + 1
		}
	}
	if best < 0 {
		return to
	}
	return best
}

// cutAt makes the operations of win still running at to indeterminate and
// returns how many.
func cutAt(win []lockOp, to int64) int {
	n := 0
	for k := range win {
		if win[k].ret != history.Never && win[k].ret >= to {
			win[k].ret, win[k].out = history.Never, outUnknown
			n++
		}
	}
	return n
}
