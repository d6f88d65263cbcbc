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

// The linearizability check hands the lock operations to porcupine against a
// lease-aware mutex model.
//
// Operations kept: successful acquires and releases, acquires that failed
// because the lock was held, releases that failed because the client was not
// the owner, and indeterminate acquires and releases. Reads and writes are
// dropped, and so are acquires and releases that failed for another reason
// (error, timeout): the model allows those in every state without effect, so
// dropping them is exact. Acquires failed with "held" are allowed only while
// somebody holds the lock, so they are kept, except those whose window
// overlaps a sure hold (see heldWindows and linOps), which is also exact.
//
// Indeterminate operations return at infinity and may or may not take
// effect (porcupine's NondeterministicModel).

type linKind uint8

const (
	linAcquire linKind = iota
	linRelease
)

type linOutcome uint8

const (
	outOK       linOutcome = iota
	outHeld                // acquire failed: held
	outNotOwner            // release failed: not the owner
	outUnknown             // indeterminate
)

// linInput is a porcupine input: the operation and, since the model's step
// does not see porcupine's times, its own times.
type linInput struct {
	kind   linKind
	client int
	owner  string
	call   int64
	ret    int64 // history.Never when indeterminate
	index  int   // in History.Ops
}

// lockState is the model's state: who holds the lock and when it was
// granted (in [acqCall, acqRet]), client 0 meaning free; with a lease, also
// now, a lower bound on the time of the last linearization point (points are
// monotone and each lies in its operation's [call, return]). The times are
// zero without a lease, where they never matter, so that equal states merge.
// depth counts the holder's acquires not yet released (reentrant locks).
type lockState struct {
	client  int
	owner   string // "" when unknown (an indeterminate acquire)
	acqCall int64
	acqRet  int64
	now     int64
	depth   int
}

// lockModel is the sequential specification of a (lease, reentrant) mutex.
type lockModel struct {
	lease      bool
	reentrant  bool
	ttl, slack int64
}

// expiry is the earliest time s's lease may have run out.
func (m lockModel) expiry(s lockState) int64 { return satAdd(s.acqCall, m.ttl-m.slack) }

func (m lockModel) owns(s lockState, in *linInput) bool {
	return s.client != 0 && s.client == in.client && (s.owner == "" || in.owner == "" || s.owner == in.owner)
}

// at returns s at time t (monotone) when the model tracks time.
func (m lockModel) at(s lockState, t int64) lockState {
	if m.lease {
		s.now = max(s.now, t)
	}
	return s
}

func (m lockModel) taken(in *linInput, t int64) lockState {
	s := lockState{client: in.client, owner: in.owner, depth: 1}
	if m.lease {
		s.acqCall, s.acqRet, s.now = in.call, in.ret, t
	}
	return s
}

// reentered is s after its holder acquired again at lo. A nested call may
// refresh the lease (Redisson's does): acqCall stays the first grant's, the
// earliest the lease may expire, and acqRet moves to the latest return, the
// latest it may have been refreshed; both the lenient bound.
func (m lockModel) reentered(s lockState, in *linInput, lo int64) lockState {
	s.depth++
	if s.owner == "" {
		s.owner = in.owner
	}
	if m.lease {
		s.acqRet = max(s.acqRet, in.ret)
		s.now = lo
	}
	return s
}

// released is s after its holder released once at t.
func (m lockModel) released(s lockState, in *linInput, t int64) lockState {
	if s.depth <= 1 {
		return m.free(t)
	}
	s.depth--
	if m.lease {
		s.acqRet = max(s.acqRet, in.ret)
		s.now = t
	}
	return s
}

func (m lockModel) free(t int64) lockState {
	if m.lease {
		return lockState{now: t}
	}
	return lockState{}
}

// step returns every state the lock can be in after in with outcome out
// from s; none when the step is impossible. The operation takes effect at a
// point p in [lo, in.ret], lo = max(s.now, in.call).
//
//   - acquire ok: the lock was free, or (lease) its holder's lease may have
//     expired by p: acqCall + TTL - slack <= p, or (reentrant) the client
//     owns it already: one level deeper.
//   - acquire failed (held): the lock was not free.
//   - release ok: the client owns the lock and (lease) p <= acqRet + TTL +
//     slack, its lease not yet surely expired; free when the last level goes.
//   - release failed (not-owner): the client does not own the lock, or
//     (lease) it does but its lease may have expired by p; then it is free.
//   - indeterminate: either no effect at all, or the effect of success.
func (m lockModel) step(s lockState, in *linInput, out linOutcome) []lockState {
	lo := in.call
	if m.lease {
		lo = max(s.now, in.call)
		if lo > in.ret {
			return nil
		}
	}
	switch in.kind {
	case linAcquire:
		// take is the earliest point at which in can take the lock, or
		// false when it cannot by in.ret.
		take, can := lo, s.client == 0
		if !can && m.lease {
			take = max(lo, m.expiry(s))
			can = take <= in.ret
		}
		var next []lockState
		if can {
			next = append(next, m.taken(in, take))
		}
		if m.reentrant && m.owns(s, in) {
			next = append(next, m.reentered(s, in, lo))
		}
		switch out {
		case outOK:
			return next
		case outHeld:
			if s.client != 0 {
				return []lockState{m.at(s, lo)}
			}
		case outUnknown:
			return append([]lockState{s}, next...)
		}
	case linRelease:
		owns := m.owns(s, in)
		switch out {
		case outOK:
			if owns && (!m.lease || lo <= satAdd(s.acqRet, m.ttl+m.slack)) {
				return []lockState{m.released(s, in, lo)}
			}
		case outNotOwner:
			if !owns {
				return []lockState{m.at(s, lo)}
			}
			if m.lease {
				if t := max(lo, m.expiry(s)); t <= in.ret {
					return []lockState{m.free(t)}
				}
			}
		case outUnknown:
			if owns {
				return []lockState{s, m.released(s, in, lo)}
			}
			return []lockState{s}
		}
	}
	return nil
}

var hashSeed = maphash.MakeSeed()

func (m lockModel) porcupine() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{lockState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			next := m.step(state.(lockState), input.(*linInput), output.(linOutcome))
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
			h.WriteString(s.owner)
			return h.Sum64() ^ uint64(s.client)*0x9e3779b97f4a7c15 ^ uint64(s.acqCall) ^ uint64(s.acqRet)<<1 ^ uint64(s.now)<<2 ^ uint64(s.depth)<<3
		},
		DescribeOperation: func(input, output interface{}) string {
			return describeLin(input.(*linInput), output.(linOutcome))
		},
		DescribeState: func(state interface{}) string { return describeState(state.(lockState)) },
	}
	return nm.ToModel()
}

func describeLin(in *linInput, out linOutcome) string {
	verb := "acquire"
	if in.kind == linRelease {
		verb = "release"
	}
	res := [...]string{"ok", "held", "not-owner", "indeterminate"}[out]
	if in.owner != "" {
		return fmt.Sprintf("client %d %s(%s) -> %s", in.client, verb, in.owner, res)
	}
	return fmt.Sprintf("client %d %s -> %s", in.client, verb, res)
}

func describeState(s lockState) string {
	if s.client == 0 {
		return "free"
	}
	d := fmt.Sprintf("held by client %d", s.client)
	if s.owner != "" {
		d += fmt.Sprintf(" (%s)", s.owner)
	}
	if s.depth > 1 {
		d += fmt.Sprintf(" %d times", s.depth)
	}
	return d
}

// heldWindows returns, sorted and merged, the intervals during which the
// model's lock is surely not free in every linearization: the interior of
// each sure hold whose acquire names its owner, cut (lease) at the earliest
// time its lease may expire, unless the client has an earlier indeterminate
// release that could still take effect on it (owner unknown or the same).
// Within a hold, only the holder's releases can free the lock, the holder's
// next release is called at the hold's end, and nobody can take the lock
// over before the lease may expire.
func heldWindows(f *facts, m lockModel) [][2]int64 {
	h, holds := f.h, f.holds
	// Earliest call of an indeterminate release, per client, that matches
	// any owner (owner unknown) or a given one.
	anyOwner := map[int]int64{}
	byOwner := map[string]int64{}
	for _, i := range f.releases {
		op := &h.Ops[i]
		if op.Return != history.Never {
			continue
		}
		if op.Owner == "" {
			if _, ok := anyOwner[op.Client]; !ok {
				anyOwner[op.Client] = op.Call
			}
		} else if _, ok := byOwner[op.Owner]; !ok {
			byOwner[op.Owner] = op.Call
		}
	}
	var ws [][2]int64
	for k := range holds {
		hd := &holds[k]
		if hd.Owner == "" {
			continue
		}
		if t, ok := anyOwner[hd.Client]; ok && t < hd.End {
			continue
		}
		if t, ok := byOwner[hd.Owner]; ok && t < hd.End {
			continue
		}
		end := hd.End
		if m.lease {
			end = min(end, satAdd(hd.AcquireCall, m.ttl-m.slack))
		}
		if end <= hd.Start {
			continue
		}
		// Open intervals: merge only those that overlap, not those that
		// merely touch.
		if n := len(ws); n > 0 && hd.Start < ws[n-1][1] {
			ws[n-1][1] = max(ws[n-1][1], end)
			continue
		}
		ws = append(ws, [2]int64{hd.Start, end})
	}
	return ws
}

// linOps converts the lock operations porcupine needs. It only counts them
// when build is false.
//
// An acquire that failed because the lock was held is dropped when its
// window [call, return] overlaps a held window: there it can be placed,
// without effect, in every linearization of the other operations, so the
// history is linearizable with it exactly when it is without it. With many
// clients these are most of the operations.
func linOps(f *facts, windows [][2]int64, build bool) (int, []porcupine.Operation) {
	h := f.h
	n := 0
	var ops []porcupine.Operation
	w := 0
	for _, i := range f.lock {
		op := &h.Ops[i]
		kind := linAcquire
		if op.Op == history.Release {
			kind = linRelease
		}
		var out linOutcome
		switch {
		case op.Type == history.OK:
			out = outOK
		case op.Type == history.Info || op.Return == history.Never:
			out = outUnknown
		case kind == linAcquire && op.Reason == history.ReasonHeld:
			out = outHeld
			// Windows are disjoint and sorted, ops by call: skip the
			// windows that ended before this call.
			for w < len(windows) && windows[w][1] <= op.Call {
				w++
			}
			if w < len(windows) && windows[w][0] < op.Return {
				continue // placeable inside a sure hold
			}
		case kind == linRelease && op.Reason == history.ReasonNotOwner:
			out = outNotOwner
		default:
			continue // failed for another reason: allowed anywhere, no effect
		}
		n++
		if !build {
			continue
		}
		in := &linInput{kind: kind, client: op.Client, owner: op.Owner, call: op.Call, ret: op.Return, index: i}
		if out == outUnknown {
			in.ret = history.Never
		}
		ops = append(ops, porcupine.Operation{
			ClientId: max(op.Client-1, 0),
			Input:    in,
			Call:     op.Call,
			Output:   out,
			Return:   in.ret,
		})
	}
	return n, ops
}

// checkLinearizable runs porcupine over the lock operations.
func checkLinearizable(f *facts, opts Options) (Property, []Anomaly) {
	h := f.h
	p := Property{Name: "linearizable", Engine: "porcupine", Status: Pass}
	m := lockModel{
		lease:     h.Info.Lease && h.Info.TTLMillis > 0,
		reentrant: h.Info.Reentrant,
		ttl:       h.Info.TTLMillis * 1e6,
		slack:     int64(opts.Slack),
	}
	windows := heldWindows(f, m)
	if n, _ := linOps(f, windows, false); n > opts.PorcupineMaxOps {
		p.Status = Unknown
		p.Detail = fmt.Sprintf("history too large for the search (%d lock operations, limit %d); the interval checks decided the rest", n, opts.PorcupineMaxOps)
		return p, nil
	}
	_, ops := linOps(f, windows, true)
	model := m.porcupine()
	p.Detail = fmt.Sprintf("%d lock operations", len(ops))
	// Small histories are searched once, keeping what explains an illegal
	// result; larger ones without that bookkeeping, then bisected.
	var res porcupine.CheckResult
	var info porcupine.LinearizationInfo
	verbose := len(ops) <= verboseMaxOps
	if verbose {
		res, info = porcupine.CheckOperationsVerbose(model, ops, opts.PorcupineTimeout)
	} else {
		res = porcupine.CheckOperationsTimeout(model, ops, opts.PorcupineTimeout)
	}
	switch res {
	case porcupine.Ok:
		return p, nil
	case porcupine.Unknown:
		p.Status = Unknown
		p.Detail = fmt.Sprintf("search timed out after %s (%d lock operations)", opts.PorcupineTimeout, len(ops))
		return p, nil
	}
	p.Status = Fail
	p.Count = 1
	if verbose {
		if a, ok := fromPartial(h, m, ops, info); ok {
			return p, []Anomaly{a}
		}
	}
	return p, []Anomaly{locateIllegal(h, m, model, ops, opts.PorcupineTimeout)}
}

// verboseMaxOps is the largest history searched with porcupine's verbose
// check, whose partial linearizations explain an illegal result; its
// bookkeeping costs O(depth) per backtrack. Larger histories are searched
// plainly and, when illegal, bisected. A variable for tests.
var verboseMaxOps = 5000

// locateIllegal names the operations behind an illegal result when the
// search did not keep its partial linearizations: it bisects for the first
// operation that cannot be placed, within budget.
func locateIllegal(h *history.History, m lockModel, model porcupine.Model, ops []porcupine.Operation, budget time.Duration) Anomaly {
	if blocker, ok := bisectIllegal(model, ops, time.Now().Add(budget)); ok {
		return illegalAnomaly(h, m, ops, blocker, nil, 0)
	}
	return Anomaly{
		Kind:    KindNonLinearizable,
		Clients: []int{},
		Start:   ops[0].Call, End: lastFinite(ops),
		Explanation: fmt.Sprintf("no order of the %d lock operations is consistent with a %s; locating the first operation that cannot be placed ran out of time.",
			len(ops), m.name()),
	}
}

func (m lockModel) name() string {
	if m.lease {
		return "lease mutex"
	}
	return "mutex"
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
func fromPartial(h *history.History, m lockModel, ops []porcupine.Operation, info porcupine.LinearizationInfo) (Anomaly, bool) {
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
		in := ops[id].Input.(*linInput)
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
	return illegalAnomaly(h, m, ops, blocker, states, len(longest)), true
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
				in := *o.Input.(*linInput)
				in.ret = history.Never
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
func illegalAnomaly(h *history.History, m lockModel, ops []porcupine.Operation, blocker int, states []lockState, placed int) Anomaly {
	b := ops[blocker]
	bin := b.Input.(*linInput)
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
		op := &h.Ops[ops[i].Input.(*linInput).index]
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
			if s.client == 0 {
				held = append(held, "free")
				continue
			}
			d := describeState(s)
			if i := grantOf(ops, s); i >= 0 {
				add(i)
				d += fmt.Sprintf(", acquired at %s", at(ops[i].Return))
				if m.lease && s.client == bin.client && s.acqRet != history.Never {
					d += fmt.Sprintf(", whose lease had surely expired by %s", at(satAdd(s.acqRet, m.ttl+m.slack)))
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
			if o := ops[i]; o.Call < b.Call && o.Input.(*linInput).kind == linAcquire && o.Output.(linOutcome) == outOK {
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
		if o.Call > b.Return || seen[i] || o.Input.(*linInput).client == bin.client || o.Output.(linOutcome) == outHeld {
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
			op := &h.Ops[ops[i].Input.(*linInput).index]
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
		in := o.Input.(*linInput)
		if in.kind == linAcquire && in.client == s.client && in.owner == s.owner &&
			(o.Output.(linOutcome) == outOK || o.Output.(linOutcome) == outUnknown) &&
			(s.acqCall == 0 || s.acqCall == in.call) {
			return i
		}
	}
	return -1
}

func describeOp(op *history.Operation) string {
	switch op.Type {
	case history.OK:
		return fmt.Sprintf("%s (ok, %s–%s)", op.Op, at(op.Call), at(op.Return))
	case history.Fail:
		return fmt.Sprintf("%s (failed: %s, %s–%s)", op.Op, op.Reason, at(op.Call), at(op.Return))
	default:
		return fmt.Sprintf("%s (indeterminate, called %s)", op.Op, at(op.Call))
	}
}
