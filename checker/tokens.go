package checker

import (
	"fmt"
	"sort"
)

// Kinds of the token-order property.
const (
	// KindTokenReused: one fencing token was granted to two owners, so the
	// resource cannot tell their writes apart.
	KindTokenReused Kind = "token-reused"
	// KindTokenRegressed: a grant carried a lower token than a grant to
	// another owner that had completed before it was asked for, so the
	// older holder outranks the newer one at the resource.
	KindTokenRegressed Kind = "token-regressed"
)

// checkTokenOrder checks the promise a fencing token makes whatever the
// resource does: every grant gets a token of its own, higher than every
// token granted before it was asked for (Kleppmann's fencing). A token
// counter that went back (a failover to a replica that missed increments,
// a restarted server that kept no state) breaks it, and then a stale holder
// outranks the new one at the resource even when the run's writes happened
// not to show it. Grants are holds (a reentrant acquire inside a hold is
// not a new grant); runs whose grants carry no token are skipped.
func checkTokenOrder(f *facts) (Property, []Anomaly) {
	h := f.h
	p := Property{Name: "token-order", Engine: "token replay", Status: Pass}
	var grants []*Hold
	for i := range f.holds {
		if f.holds[i].Token != nil {
			grants = append(grants, &f.holds[i])
		}
	}
	if len(grants) == 0 {
		p.Status = Skipped
		p.Detail = "no grant carries a fencing token"
		return p, nil
	}
	var out []Anomaly
	anomaly := func(kind Kind, a, b *Hold, text string) {
		out = append(out, Anomaly{
			Kind:        kind,
			Clients:     []int{b.Client, a.Client},
			Start:       a.Start,
			End:         b.Start,
			Ops:         []int64{a.AcquireOp, b.AcquireOp},
			Faults:      faultsDuring(h, a.AcquireCall, b.Start),
			Explanation: text,
		})
	}
	// Reuse: the same token for two owners, whenever they were granted.
	first := map[int64]*Hold{}
	reused := 0
	for _, g := range grants { // in order of grant (holds are sorted by start)
		tok := *g.Token
		a, ok := first[tok]
		if !ok {
			first[tok] = g
			continue
		}
		if a.Owner == g.Owner && a.Client == g.Client {
			continue
		}
		reused++
		anomaly(KindTokenReused, a, g, fmt.Sprintf(
			"client %d was granted fencing token %d at %s, the token client %d had been granted at %s: the resource cannot tell their writes apart.",
			g.Client, tok, at(g.Start), a.Client, at(a.Start)))
	}
	// Regression: in order of the acquires' invocations, the highest token
	// among the grants that had returned before each acquire was invoked.
	byCall := make([]*Hold, len(grants))
	copy(byCall, grants)
	sort.SliceStable(byCall, func(i, j int) bool { return byCall[i].AcquireCall < byCall[j].AcquireCall })
	var best *Hold
	k, regressed := 0, 0
	for _, g := range byCall {
		for ; k < len(grants) && grants[k].Start < g.AcquireCall; k++ {
			if best == nil || *grants[k].Token > *best.Token {
				best = grants[k]
			}
		}
		if best == nil || *g.Token >= *best.Token || best.Owner == g.Owner && best.Client == g.Client {
			continue
		}
		regressed++
		anomaly(KindTokenRegressed, best, g, fmt.Sprintf(
			"client %d was granted fencing token %d at %s, lower than token %d, granted to client %d at %s before client %d asked: the older holder outranks the newer one at the resource, whose writes it may overwrite or have rejected.",
			g.Client, *g.Token, at(g.Start), *best.Token, best.Client, at(best.Start), g.Client))
	}
	p.Count = len(out)
	p.Detail = fmt.Sprintf("%s checked: %s, %s",
		plural(len(grants), "grant with a token", "grants with a token"),
		plural(reused, "token granted twice", "tokens granted twice"),
		plural(regressed, "token lower than an earlier grant's", "tokens lower than an earlier grant's"))
	if len(out) > 0 {
		p.Status = Fail
	}
	return p, out
}
