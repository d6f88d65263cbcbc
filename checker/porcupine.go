package checker

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktest/locktest/history"
)

// Porcupine: the general linearizability checker, run on the same model
// (lockModel) as the lock sweep. It is the oracle of the differential
// tests and the fallback where the sweep exceeds its search bound.
//
// Indeterminate operations return at infinity and may or may not take
// effect (porcupine's NondeterministicModel).

var hashSeed = maphash.MakeSeed()

func (m lockModel) porcupine(ow *owners) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{lockState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			next := m.step(state.(lockState), input.(*lockOp), output.(linOutcome))
			out := make([]interface{}, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal: func(a, b interface{}) bool { return a.(lockState) == b.(lockState) },
		Hash: func(state interface{}) uint64 {
			s := state.(lockState)
			var h maphash.Hash
			h.SetSeed(hashSeed)
			var b [8]byte
			for _, v := range []uint64{uint64(s.client), uint64(s.owner), uint64(s.depth), uint64(s.readers), uint64(s.acqCall), uint64(s.acqRet), uint64(s.now)} {
				for k := range b {
					b[k] = byte(v >> (8 * k))
				}
				h.Write(b[:])
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			return describeLin(input.(*lockOp), ow)
		},
		DescribeState: func(state interface{}) string { return describeStateRW(state.(lockState), ow, m.rs) },
	}
	return nm.ToModel()
}

// porcupineOps converts lock operations for porcupine.
func porcupineOps(ops []lockOp) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for k := range ops {
		op := &ops[k]
		out[k] = porcupine.Operation{
			ClientId: max(int(op.client)-1, 0),
			Input:    op,
			Call:     op.call,
			Output:   op.out,
			Return:   op.ret,
		}
	}
	return out
}

// porcupineVerdict runs porcupine over ops: Ok, Illegal or Unknown (timed
// out).
func porcupineVerdict(m lockModel, ops []lockOp, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(m.porcupine(m.ow), porcupineOps(ops), timeout)
}

// checkPorcupine decides the linearizable property with porcupine over the
// lock operations of h (ops: in order of invocation, less those both
// engines provably do not need).
func checkPorcupine(h *history.History, ops []lockOp, m lockModel, opts Options) (Property, []Anomaly) {
	p := Property{Name: "linearizable", Engine: EnginePorcupine, Status: Pass}
	ow := m.ow
	if len(ops) > opts.PorcupineMaxOps {
		p.Status = Unknown
		p.Detail = fmt.Sprintf("history too large for the search (%d lock operations, limit %d); the interval checks decided the rest", len(ops), opts.PorcupineMaxOps)
		return p, nil
	}
	model := m.porcupine(ow)
	pops := porcupineOps(ops)
	p.Detail = fmt.Sprintf("%d lock operations", len(ops))
	// Small histories are searched once, keeping what explains an illegal
	// result; larger ones without that bookkeeping, then bisected.
	var res porcupine.CheckResult
	var info porcupine.LinearizationInfo
	verbose := len(pops) <= verboseMaxOps
	if verbose {
		res, info = porcupine.CheckOperationsVerbose(model, pops, opts.PorcupineTimeout)
	} else {
		res = porcupine.CheckOperationsTimeout(model, pops, opts.PorcupineTimeout)
	}
	switch res {
	case porcupine.Ok:
		return p, nil
	case porcupine.Unknown:
		p.Status = Unknown
		p.Detail = fmt.Sprintf("search timed out after %s (%d lock operations)", opts.PorcupineTimeout, len(pops))
		return p, nil
	}
	p.Status = Fail
	p.Count = 1
	if verbose {
		if a, ok := fromPartial(h, m, ow, pops, info); ok {
			return p, []Anomaly{a}
		}
	}
	return p, []Anomaly{locateIllegal(h, m, ow, model, pops, opts.PorcupineTimeout)}
}

// verboseMaxOps is the largest history searched with porcupine's verbose
// check, whose partial linearizations explain an illegal result; its
// bookkeeping costs O(depth) per backtrack. Larger histories are searched
// plainly and, when illegal, bisected. A variable for tests.
var verboseMaxOps = 5000

// locateIllegal names the operations behind an illegal result when the
// search did not keep its partial linearizations: it bisects for the first
// operation that cannot be placed, within budget.
func locateIllegal(h *history.History, m lockModel, ow *owners, model porcupine.Model, ops []porcupine.Operation, budget time.Duration) Anomaly {
	if blocker, ok := bisectIllegal(model, ops, time.Now().Add(budget)); ok {
		return illegalAnomaly(h, m, ow, ops, blocker, nil, 0)
	}
	return Anomaly{
		Kind:    KindNonLinearizable,
		Clients: []int{},
		Start:   ops[0].Call, End: lastFinite(ops),
		Explanation: fmt.Sprintf("no order of the %d lock operations is consistent with a %s; locating the first operation that cannot be placed ran out of time.",
			len(ops), m.name()),
	}
}

func lastFinite(ops []porcupine.Operation) int64 {
	var t int64
	for _, o := range ops {
		if o.Return != history.Never && o.Return > t {
			t = o.Return
		}
	}
	return t
}

// fromPartial uses the longest partial linearization: the operation that
// returned first among those it leaves out is the one that cannot be placed.
func fromPartial(h *history.History, m lockModel, ow *owners, ops []porcupine.Operation, info porcupine.LinearizationInfo) (Anomaly, bool) {
	parts := info.PartialLinearizations()
	if len(parts) == 0 || len(parts[0]) == 0 {
		return Anomaly{}, false
	}
	longest := parts[0][0]
	for _, l := range parts[0][1:] {
		if len(l) > len(longest) {
			longest = l
		}
	}
	placed := make([]bool, len(ops))
	for _, id := range longest {
		placed[id] = true
	}
	blocker := -1
	for i, o := range ops {
		if placed[i] || o.Return == history.Never {
			continue
		}
		if blocker < 0 || o.Return < ops[blocker].Return {
			blocker = i
		}
	}
	if blocker < 0 {
		return Anomaly{}, false
	}
	// Replay the partial linearization to find the states it ends in.
	states := []lockState{{}}
	for _, id := range longest {
		in := ops[id].Input.(*lockOp)
		var next []lockState
		for _, s := range states {
			for _, n := range m.step(s, in, ops[id].Output.(linOutcome)) {
				if !slices.Contains(next, n) {
					next = append(next, n)
				}
			}
		}
		states = next
	}
	return illegalAnomaly(h, m, ow, ops, blocker, states, len(longest)), true
}

// bisectIllegal finds the first operation that cannot be placed: the one
// returning at the earliest time T such that the operations called by T,
// with those still running at T made indeterminate, are already illegal.
// That prefix history is linearizable whenever a longer one is, so the
// search is a bisection over return times.
func bisectIllegal(model porcupine.Model, ops []porcupine.Operation, deadline time.Time) (int, bool) {
	var order []int // ops with a finite return, by return
	for i, o := range ops {
		if o.Return != history.Never {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpInt64(ops[a].Return, ops[b].Return) })
	illegal := func(k int) (bool, bool) {
		t := ops[order[k]].Return
		var sub []porcupine.Operation
		for _, o := range ops {
			if o.Call > t {
				continue
			}
			if o.Return > t {
				o.Return = history.Never
				o.Output = outUnknown
				in := *o.Input.(*lockOp)
				in.ret, in.out = history.Never, outUnknown
				o.Input = &in
			}
			sub = append(sub, o)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, false
		}
		switch porcupine.CheckOperationsTimeout(model, sub, left) {
		case porcupine.Illegal:
			return true, true
		case porcupine.Ok:
			return false, true
		}
		return false, false
	}
	lo, hi := -1, len(order)-1 // prefix lo is legal (or empty), prefix hi illegal
	if hi < 0 {
		return 0, false
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		bad, ok := illegal(mid)
		if !ok {
			return 0, false
		}
		if bad {
			hi = mid
		} else {
			lo = mid
		}
	}
	return order[hi], true
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// illegalAnomaly describes the blocker: the operation that cannot be placed,
// with the state(s) the lock was in (when known) and the lock operations of
// other clients around it.
func illegalAnomaly(h *history.History, m lockModel, ow *owners, ops []porcupine.Operation, blocker int, states []lockState, placed int) Anomaly {
	b := ops[blocker]
	bin := b.Input.(*lockOp)
	bop := &h.Ops[bin.index]
	a := Anomaly{
		Kind:    KindNonLinearizable,
		Clients: []int{bop.Client},
		Start:   bop.Call,
		End:     bop.Return,
		Ops:     []int64{bop.OpID},
	}
	seen := map[int]bool{blocker: true}
	add := func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		op := &h.Ops[ops[i].Input.(*lockOp).index]
		a.Ops = append(a.Ops, op.OpID)
		if !slices.Contains(a.Clients, op.Client) {
			a.Clients = append(a.Clients, op.Client)
		}
		a.Start = min(a.Start, op.Call)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "no order of the %d lock operations is consistent with a %s", len(ops), m.name())
	// from is where the story starts: the grant behind the state the
	// blocker met, or else the last successful acquire called before it.
	from := int64(-1)
	if states != nil {
		fmt.Fprintf(&sb, ": the longest consistent order places %d of them, then client %d's %s cannot be placed",
			placed, bop.Client, describeOp(bop))
		var held []string
		for _, s := range states {
			if !s.held() {
				held = append(held, "free")
				continue
			}
			d := describeStateRW(s, ow, m.rs)
			if i := grantOf(ops, s); i >= 0 {
				add(i)
				d += fmt.Sprintf(", acquired at %s", at(ops[i].Return))
				if m.lease && s.client == bin.client && s.acqRet != history.Never {
					d += fmt.Sprintf(", whose lease had surely expired by %s", at(m.deadline(s)))
				}
				if from < 0 || ops[i].Call < from {
					from = ops[i].Call
				}
			}
			held = append(held, d)
		}
		fmt.Fprintf(&sb, " because the lock was %s", strings.Join(held, " or "))
	} else {
		fmt.Fprintf(&sb, ": client %d's %s is the first operation that cannot be placed", bop.Client, describeOp(bop))
	}
	if from < 0 {
		from = b.Call
		for i := len(ops) - 1; i >= 0; i-- {
			if o := ops[i]; o.Call < b.Call && o.Input.(*lockOp).kind == linAcquire && o.Output.(linOutcome) == outOK {
				from = o.Call
				break
			}
		}
	}
	// Name the other clients' successful or indeterminate lock operations
	// between from and the blocker's return, the latest four.
	var near []int
	for i := len(ops) - 1; i >= 0 && len(near) < 4; i-- {
		o := ops[i]
		if o.Call > b.Return || seen[i] || o.Input.(*lockOp).client == bin.client || o.Output.(linOutcome) == outHeld {
			continue
		}
		if o.Return < from {
			break
		}
		near = append(near, i)
	}
	slices.Reverse(near)
	if len(near) > 0 {
		var ds []string
		for _, i := range near {
			add(i)
			op := &h.Ops[ops[i].Input.(*lockOp).index]
			ds = append(ds, fmt.Sprintf("client %d's %s", op.Client, describeOp(op)))
		}
		fmt.Fprintf(&sb, "; meanwhile %s", strings.Join(ds, ", "))
	}
	sb.WriteString(".")
	a.Explanation = sb.String()
	a.Faults = faultsDuring(h, a.Start, a.End)
	return a
}

// grantOf finds the acquire that put the lock in state s.
func grantOf(ops []porcupine.Operation, s lockState) int {
	for i, o := range ops {
		in := o.Input.(*lockOp)
		if in.kind == linAcquire && in.client == s.client && in.owner == s.owner &&
			(o.Output.(linOutcome) == outOK || o.Output.(linOutcome) == outUnknown) &&
			(s.acqCall == 0 || s.acqCall == in.call || in.ret == history.Never) {
			return i
		}
	}
	return -1
}

func describeOp(op *history.Operation) string { return describeOpD(op, 2) }

// describeOpD is describeOp with its times in d decimals of a second (atD).
func describeOpD(op *history.Operation, d int) string {
	at := func(ns int64) string { return atD(ns, d) }
	name := string(op.Op)
	if op.Op == history.Acquire && op.Mode != "" {
		name = op.Mode + " " + name // read-write locks
	}
	switch op.Type {
	case history.OK:
		return fmt.Sprintf("%s (ok, %s–%s)", name, at(op.Call), at(op.Return))
	case history.Fail:
		return fmt.Sprintf("%s (failed: %s, %s–%s)", name, op.Reason, at(op.Call), at(op.Return))
	default:
		return fmt.Sprintf("%s (indeterminate, called %s)", name, at(op.Call))
	}
}
