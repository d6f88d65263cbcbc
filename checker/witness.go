package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
)

// A witness of a non-linearizable history: a few operations, including the
// first one that cannot be placed (the blocker), that alone already cannot
// all be placed, the blocker again being the first that cannot. The sweep
// starts from what made the lock's state at the blocker's return (the
// grants and frees behind every configuration that was open), widens to the
// operations just before the blocker if those do not suffice, and then
// removes every operation it can while the blocker still cannot be placed.

// witness returns the witness's operations (indices into s.ops), in order
// of invocation.
// It stops widening and shrinking when b runs out.
func (s *sweep) witness(b *budget) []int32 {
	x := s.blocker
	set := []int32{x}
	add := func(i int32) {
		if i >= 0 && !slices.Contains(set, i) {
			set = append(set, i)
		}
	}
	// First the grants alone: the holder that stands in the blocker's way
	// is the witness a person expects; the release that freed the lock
	// before that grant, without its own acquire, would itself be the
	// first operation that cannot be placed.
	for k := range s.before {
		if k == 8 {
			break
		}
		add(s.before[k].grant)
	}
	slices.Sort(set)
	if !s.failsAt(set, x) {
		for k := range s.before {
			if k == 8 {
				break
			}
			c := &s.before[k]
			add(c.freed)
			for _, l := range c.lin {
				add(l)
			}
		}
		slices.Sort(set)
	}
	if !s.failsAt(set, x) {
		t := s.ops[x].ret
		last := int32(sort.Search(len(s.ops), func(i int) bool { return s.ops[i].call > t })) - 1
		for w := int32(16); ; w *= 2 {
			lo := max(0, last-w+1)
			wide := slices.Clone(set)
			for i := lo; i <= last; i++ {
				if !slices.Contains(set, i) {
					wide = append(wide, i)
				}
			}
			slices.Sort(wide)
			if s.failsAt(wide, x) || lo == 0 || b.over() {
				set = wide
				break
			}
		}
	}
	return s.shrink(set, x, b)
}

// failsAt reports whether the operations of set (sorted), alone, cannot
// all be placed, x being the first that cannot.
func (s *sweep) failsAt(set []int32, x int32) bool {
	ops := make([]lockOp, len(set))
	pos := int32(-1)
	for k, i := range set {
		ops[k] = s.ops[i]
		if i == x {
			pos = int32(k)
		}
	}
	sub := newSweep(s.m, s.bound)
	sub.mergeOrphans = s.mergeOrphans
	if s.look != nil {
		sub.look = newLookahead(ops, s.m.ow)
	}
	sub.runAll(ops)
	return sub.failed && sub.blocker == pos
}

// shrink removes from set (sorted) the operations without which x still is
// the first that cannot be placed (minimize: ddmin, then one at a time),
// x always kept, until b runs out.
func (s *sweep) shrink(set []int32, x int32, b *budget) []int32 {
	others := slices.DeleteFunc(slices.Clone(set), func(i int32) bool { return i == x })
	r := minimize(others, func(kept []int32) bool {
		trial := append(slices.Clone(kept), x)
		slices.Sort(trial)
		return s.failsAt(trial, x)
	}, b.wall0.Add(b.wall), b.over)
	out := append(r.kept, x)
	slices.Sort(out)
	return out
}

// anomaly describes the first operation that cannot be placed, the lock's
// state(s) then, and the witness. hops are the history's operations
// (lockOp.index points into them); h gives the faults. Finding the witness
// gets budget of CPU time (budget.go).
func (r sweepRun) anomaly(hops []history.Operation, h *history.History, budget time.Duration) Anomaly {
	s := r.s
	x := &s.ops[s.blocker]
	xh := &hops[x.index]
	b := startBudget(budget)
	wit := s.witness(b)
	b.stop()
	a := Anomaly{
		Kind:    KindNonLinearizable,
		Clients: []int{xh.Client},
		Start:   xh.Call,
		End:     xh.Return,
		Ops:     []int64{xh.OpID},
	}
	var ds []string
	for _, i := range wit {
		o := &hops[s.ops[i].index]
		ds = append(ds, fmt.Sprintf("client %d's %s", o.Client, describeOp(o)))
		if i == s.blocker {
			continue
		}
		a.Ops = append(a.Ops, o.OpID)
		if !slices.Contains(a.Clients, o.Client) {
			a.Clients = append(a.Clients, o.Client)
		}
		a.Start = min(a.Start, o.Call)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "no order of the lock operations is consistent with a %s: client %d's %s cannot be placed because the lock was %s",
		s.m.name(), xh.Client, describeOp(xh), r.describeStates(hops, x))
	if len(wit) > 1 {
		fmt.Fprintf(&sb, ". These %d operations alone already cannot all be placed: %s", len(wit), strings.Join(ds, "; "))
	}
	sb.WriteString(".")
	a.Explanation = sb.String()
	if h != nil {
		a.Faults = faultsDuring(h, a.Start, a.End)
	}
	return a
}

// describeStates says what the lock was in each configuration open when x
// could not be placed.
func (r sweepRun) describeStates(hops []history.Operation, x *lockOp) string {
	s, m := r.s, r.s.m
	var out []string
	for k := range s.before {
		c := &s.before[k]
		var d string
		if !c.s.held() {
			d = "free"
			if c.freed >= 0 {
				f := &hops[s.ops[c.freed].index]
				d += fmt.Sprintf(" (client %d's %s had freed it)", f.Client, describeOp(f))
			}
		} else {
			d = describeStateRW(c.s, r.ow, m.rs)
			if c.grant >= 0 {
				g := &s.ops[c.grant]
				if g.ret != history.Never {
					d += ", acquired at " + at(g.ret)
				} else {
					d += fmt.Sprintf(", taken by its indeterminate acquire called at %s", at(g.call))
				}
			}
			if m.lease {
				switch {
				case x.kind == linRelease && x.out == outOK && m.owns(c.s, x) && m.deadline(c.s) < x.ret:
					d += ", whose lease had surely expired by " + at(m.deadline(c.s))
				case x.kind == linAcquire && x.out == outOK && m.expiry(c.s) > x.ret:
					d += ", whose lease could not have expired before " + at(m.expiry(c.s))
				case x.kind == linRelease && x.out == outNotOwner && m.owns(c.s, x) && m.expiry(c.s) > x.ret:
					d += ", whose lease was still valid until " + at(m.expiry(c.s))
				}
			}
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if len(out) > 3 {
		out = append(out[:3], fmt.Sprintf("%d other ways", len(out)-3))
	}
	if len(out) == 0 {
		return "in no state that allows it"
	}
	return strings.Join(out, " or ")
}
