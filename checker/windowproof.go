package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
)

// The window proof (issue 17, the failure direction): when every beam pass
// stops at an operation it cannot place, the exact pass over the whole
// history may run out of its budget long before it gets there. The place
// where the beams stopped localises the violation: a *relaxed window*
// history, made of the operations around it, where everything that is not
// wholly inside the window is loosened so that it only ADDS behaviours, is
// small enough for the exact sweep. If even the relaxed window cannot be
// ordered, neither can the whole history.
//
// The relaxed window W of [a, b] (b the blocker's return), on an exclusive,
// non-reentrant lease lock without renewals (lockModel.step), is:
//
//   - every operation invoked in [a, b] that returned by b or never
//     returned (indeterminate), as it is;
//   - every other operation invoked by b that is not wholly before a:
//     failed acquires are dropped, the others become indeterminate (same
//     client, owner and invocation; no return; a successful acquire keeps
//     its return as the latest its lease may have been granted, grantBy,
//     so its deadline stays);
//   - of the operations invoked before a that returned before a or never:
//     a successful or indeterminate acquire X is kept, indeterminate, when
//     its lease may still run at a (X.call + life > a) or a successful
//     release kept above as it is can free its hold (ownsHold); a release is kept when it can
//     free a hold of an acquire kept (indeterminate, but a refused one as
//     it is); the rest are dropped;
//   - when an acquire was dropped, a pool of phantom indeterminate acquires
//     by a client that has no operation, invoked one lease before every
//     operation of W, so that their lease may have run out at every point
//     of W: each stands for a dropped acquire taking the lock.
//
// Why it is sound: every linearization L of the full history gives one of
// W (restricted to the window, up to b), so if W has none, neither has the
// history. Walk L in order and map each step:
//
//   - an operation of W: the same step (a refused release kept as it is
//     takes it too, or, where L's holder is a phantom in W, leaves the
//     expired phantom holding, see below). Loosening only adds outcomes: an
//     indeterminate acquire may have no effect or take the lock exactly when
//     a successful one can (with a later deadline: acqRet is never); an
//     indeterminate release may have no effect or free the lock whenever it
//     owns it (ok needs that and more; a refused release frees it only when
//     it owns it and its lease may have expired). A dropped failed acquire
//     only moved the model's clock, and an earlier clock allows everything
//     a later one does (every condition is lo <= something).
//   - a dropped acquire X taking the lock: a phantom takes it instead. X's
//     lease had surely run out by a (else it was kept) and no operation of
//     W can free its hold (else it was kept); the phantom's has run out at
//     every point of W and nothing owns it. So the two states answer every
//     operation of W alike, the phantom's more leniently (expired sooner).
//     A phantom taking a lock a phantom holds is skipped (the same state, an
//     earlier clock): at most one use per other acquire of W, plus one.
//   - a dropped release r freeing a hold: r owns no acquire kept, so the
//     hold was a dropped acquire's, a phantom's in W; W keeps the phantom.
//     A held lock whose lease may have run out answers every operation the
//     free lock does, with the same resulting state: an acquire takes it at
//     its own point, a release that does not own it changes nothing, and it
//     also explains refusals (expiredOverFree, rule 2 of README's issue 17).
//     The same holds where a kept release frees a dropped acquire's hold in
//     L but cannot free the phantom's in W (it is not a successful one
//     kept as it is, else the hold's acquire was kept): it may leave the
//     phantom be.
//   - every other dropped operation is wholly before a and its effect is
//     one of the above (a failed acquire, or a release freeing a dropped
//     hold), or the operation returned after b (invoked after b: dropped
//     with the rest of L's suffix; a prefix of a linearization is one).
//
// Each mapped state is thus the state of L's step with, at most, the
// holder replaced by a phantom (a hold that nothing in W owns, expired) and
// a later deadline or an earlier clock: each answers every later operation
// of W at least as L's did. Kept acquires carry their own invocation, so
// their leases' earliest expiry is unchanged.
//
// Where it applies: lease mutexes (and sessions that end with an idle
// timeout, which the model takes for a lease). Not to locks without expiry
// (a dropped hold would block forever, where L freed it), renewed leases,
// reentrant or read-write locks, nor where an acquire that returned ok
// names no owner (its indeterminate twin would take a fresh key): there it
// declines, and the verdict is the exact pass's, as before.

// windowProofOn enables the window proof (tests turn it off to measure
// the checker without it).
var windowProofOn = true

// windowTrace, when set (tests), is told of every window swept.
var windowTrace func(blocker int32, a, b int64, n, kept, phantoms int, passed bool, s *sweep)

// windowProofBudget bounds the CPU time spent on window proofs in one check
// (budget.go).
const windowProofBudget = 3 * time.Second

// windowTryBudget bounds one try's CPU time (the windows at one blocker,
// with a wall-time ceiling wallCeiling times that): a narrow
// beam that stops on a linearizable history gives a blocker no window
// fails, and the wider beam should not wait long for it.
const windowTryBudget = time.Second

// windowFirst is the first window's length in leases; each next window is
// twice as long, at most windowSteps of them.
const (
	windowFirst = 2
	windowSteps = 7
)

// windowFailure is a relaxed window that cannot be ordered.
type windowFailure struct {
	blocker int32 // index into the full history's ops
	a, b    int64
	ops     []lockOp // the relaxed window
	kept    int      // operations of the window that stayed definite
	phantom int      // phantom acquires added
	s       *sweep   // the window's exact sweep, failed
	tried   int      // windows swept
}

// windowProofApplies reports whether the relaxation is sound for m.
func windowProofApplies(m lockModel) bool {
	return m.lease && !m.renews && !m.reentrant && !m.rw && m.early == 0
}

// windowProver tries window proofs at the operations where beam passes
// stopped, within windowProofBudget in all (the CPU time spent in tries,
// not in the passes between them).
type windowProver struct {
	ops           []lockOp
	m             lockModel
	opts          Options
	halt          func() bool
	cur           *budget       // of the current try
	left          time.Duration // of windowProofBudget, for the tries to come
	phantomClient int32
	seen          map[int32]bool
	tried         int
}

func newWindowProver(ops []lockOp, m lockModel, opts Options, halt func() bool) *windowProver {
	client := int32(0)
	for k := range ops {
		client = max(client, ops[k].client)
	}
	return &windowProver{ops: ops, m: m, opts: opts, halt: halt, phantomClient: client + 1,
		left: windowProofBudget, seen: map[int32]bool{}}
}

func (p *windowProver) stop() bool {
	return p.cur.over() || (p.halt != nil && p.halt())
}

// try sweeps relaxed windows ending at the return of blocker (an index
// into ops, the operation at which a beam pass stopped; -1 for none),
// growing, each decided by the exact sweep; it returns the first that
// cannot be ordered, or nil.
func (p *windowProver) try(blocker int32) *windowFailure {
	ops, m := p.ops, p.m
	if !windowProofOn || !windowProofApplies(m) || blocker < 0 || p.seen[blocker] || ops[blocker].ret == history.Never {
		return nil
	}
	p.seen[blocker] = true
	if p.left <= 0 {
		return nil
	}
	p.cur = startBudget(min(p.left, windowTryBudget))
	defer func() {
		p.cur.stop()
		cpu, _ := p.cur.spent()
		p.left -= cpu
	}()
	b := ops[blocker].ret
	w := windowFirst * m.ttl
	for range windowSteps {
		if p.stop() {
			return nil
		}
		a := b - w
		wops, kept, phantoms, ok := relaxedWindow(ops, m, a, b, p.phantomClient)
		if !ok {
			return nil
		}
		p.tried++
		s := newSweep(m, p.opts.SearchBound)
		s.halt = p.stop
		s.mergeOrphans, s.look = true, newLookahead(wops, m.ow)
		res := s.runAll(wops)
		if windowTrace != nil {
			windowTrace(blocker, a, b, len(wops), kept, phantoms, res, s)
		}
		if !res && s.failed {
			return &windowFailure{blocker: blocker, a: a, b: b, ops: wops, kept: kept, phantom: phantoms, s: s, tried: p.tried}
		}
		if s.stats.Exceeded || a <= ops[0].call {
			return nil // (a wider window costs more, or there is none)
		}
		w *= 2
	}
	return nil
}

// relaxedWindow builds the relaxed window of [a, b] (see above), in order
// of invocation: the operations, how many stayed definite and how many
// phantoms were added; ok is false where the relaxation does not apply.
func relaxedWindow(ops []lockOp, m lockModel, a, b int64, phantomClient int32) (w []lockOp, kept, phantoms int, ok bool) {
	life := m.life()
	loose := func(op lockOp) lockOp {
		if op.ret != history.Never {
			op.done = op.ret
			if op.kind == linAcquire && op.out == outOK {
				op.grantBy = op.ret
			}
		}
		op.out, op.ret = outUnknown, history.Never
		return op
	}
	// heldOwner is the owner a hold of acquire op carries in the model.
	heldOwner := func(op *lockOp) int32 {
		if op.owner == 0 && op.ret == history.Never {
			return ownerFresh
		}
		return op.owner
	}
	var before []int32            // acquires and releases wholly before a, or lost before a
	relsOf := map[int32][]int32{} // releases of W by client
	acqsOf := map[int32][]int32{} // acquires of W by client
	addW := func(op lockOp) {
		w = append(w, op)
		k := int32(len(w) - 1)
		switch {
		case op.kind == linRelease:
			relsOf[op.client] = append(relsOf[op.client], k)
		case op.out != outHeld: // (a refused acquire holds nothing)
			acqsOf[op.client] = append(acqsOf[op.client], k)
		}
	}
	for k := range ops {
		op := ops[k]
		if op.call > b {
			break
		}
		if op.kind == linAcquire && op.out == outHeld && (op.call < a || op.ret > b) {
			continue // dropped: it only moved the clock
		}
		switch {
		case op.call >= a && (op.ret <= b || op.ret == history.Never):
			addW(op)
			kept++
		case op.call >= a || (op.ret >= a && op.ret != history.Never):
			if op.kind == linAcquire && op.out == outOK && op.owner == 0 {
				return nil, 0, 0, false
			}
			addW(loose(op))
		default:
			before = append(before, int32(k))
		}
	}
	// The acquires before a: kept when their lease may still run at a or
	// a release of W can free their hold.
	dropped := 0
	var keptAcq []int32
	for _, k := range before {
		op := &ops[k]
		if op.kind != linAcquire {
			continue
		}
		keep := satAdd(op.call, life) > a
		for _, r := range relsOf[op.client] {
			if keep {
				break
			}
			// Only a successful release must own the hold: any other
			// may leave it be (an indeterminate one has no effect, a
			// refused one does not own the phantom), and an expired
			// phantom holding answers as the free lock would.
			keep = w[r].out == outOK && w[r].ret != history.Never && m.ownsHold(op.client, heldOwner(op), &w[r])
		}
		if !keep {
			dropped++
			continue
		}
		if op.out == outOK && op.owner == 0 {
			return nil, 0, 0, false
		}
		keptAcq = append(keptAcq, k)
	}
	for _, k := range keptAcq {
		addW(loose(ops[k]))
	}
	// The releases before a: kept when they can free a hold of W.
	for _, k := range before {
		op := &ops[k]
		if op.kind != linRelease {
			continue
		}
		for _, q := range acqsOf[op.client] {
			if m.ownsHold(op.client, heldOwner(&w[q]), op) {
				if op.out == outNotOwner {
					// Refused before a: it takes the same step in W
					// (or, where L's holder is a phantom in W, one that
					// leaves the expired phantom holding).
					w = append(w, *op)
				} else {
					w = append(w, loose(*op))
				}
				break
			}
		}
	}
	if dropped > 0 {
		first := b
		for k := range w {
			first = min(first, w[k].call)
		}
		n := 0
		for k := range w {
			if w[k].kind == linAcquire {
				n++
			}
		}
		phantoms = min(dropped, n+1)
		call := first - max(life, 0) - 1
		for range phantoms {
			w = append(w, lockOp{kind: linAcquire, out: outUnknown, client: phantomClient, index: -1,
				call: call, ret: history.Never, done: call})
		}
	}
	slices.SortStableFunc(w, func(x, y lockOp) int { return cmpInt64(x.call, y.call) })
	return w, kept, phantoms, true
}

// anomaly explains a window that cannot be ordered, naming the operation
// the beams stopped at and the definite operations of the window closest
// to it.
func (f windowFailure) anomaly(ops []lockOp, hops []history.Operation, h *history.History, m lockModel) Anomaly {
	x := &hops[ops[f.blocker].index]
	an := Anomaly{
		Kind:    KindNonLinearizable,
		Clients: []int{x.Client},
		Start:   x.Call,
		End:     x.Return,
		Ops:     []int64{x.OpID},
	}
	// The window's blocker, as the window's sweep saw it.
	var wx *history.Operation
	if f.s.blocker >= 0 && f.s.ops[f.s.blocker].index >= 0 {
		wx = &hops[f.s.ops[f.s.blocker].index]
	}
	var near []string
	add := func(o *history.Operation) {
		if slices.Contains(an.Ops, o.OpID) {
			return
		}
		an.Ops = append(an.Ops, o.OpID)
		if !slices.Contains(an.Clients, o.Client) {
			an.Clients = append(an.Clients, o.Client)
		}
		an.Start, an.End = min(an.Start, o.Call), max(an.End, o.Return)
		near = append(near, fmt.Sprintf("client %d's %s", o.Client, describeOp(o)))
	}
	if wx != nil && wx != x {
		add(wx)
	}
	// The definite operations of the window that returned last before the
	// blocker's return, up to 6.
	var def []int32
	for k := range f.ops {
		o := &f.ops[k]
		if o.index >= 0 && o.ret != history.Never && o.call >= f.a && o.ret <= f.b && o.out != outHeld && &hops[o.index] != x {
			def = append(def, int32(k))
		}
	}
	slices.SortFunc(def, func(i, j int32) int { return cmpInt64(f.ops[j].ret, f.ops[i].ret) })
	for _, k := range def[:min(len(def), 6)] {
		add(&hops[f.ops[k].index])
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "no order of the lock operations is consistent with a %s: ", m.name())
	fmt.Fprintf(&sb, "client %d's %s cannot be placed even when every operation invoked before %s, or not returned by %s, is taken as indeterminate (it may or may not have taken effect) and any earlier holder may still hold the expired lock",
		x.Client, describeOp(x), at(f.a), at(f.b))
	fmt.Fprintf(&sb, ": the %d operations of that window (%d of them definite) cannot be ordered", len(f.ops), f.kept)
	if wx != nil && wx != x {
		fmt.Fprintf(&sb, " (the window's exact sweep stops at client %d's %s)", wx.Client, describeOp(wx))
	}
	if len(near) > 0 {
		fmt.Fprintf(&sb, "; around it: %s", strings.Join(near, "; "))
	}
	sb.WriteString(".")
	an.Explanation = sb.String()
	if h != nil {
		an.Faults = faultsDuring(h, an.Start, an.End)
	}
	return an
}

// detail says how the window proof decided.
func (f windowFailure) detail() string {
	st := &f.s.stats
	return fmt.Sprintf("a beam pass of the lock sweep stopped; the relaxed window [%s, %s] ending at the return it stopped at (%d operations, %d definite, %d phantom acquires) cannot be ordered: exact sweep of the window, %d returns, at most %s open (%d windows tried)",
		at(f.a), at(f.b), len(f.ops), f.kept, f.phantom, st.Forced+st.Searched, plural(st.MaxFrontier, "configuration", "configurations"), f.tried)
}
