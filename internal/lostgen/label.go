package lostgen

import (
	"fmt"
	"sort"

	"github.com/locktest/locktest/history"
)

// finish labels the injections from the whole history and fills in the
// truth.
func (g *gen) finish() Truth {
	t := g.truth
	t.Seed = g.cfg.Seed
	t.End = g.now
	if g.now > 0 {
		t.MeanOpen = g.openArea / float64(g.lastT)
	}
	t.Unavailable = g.truth.Unavailable
	g.expire()
	if g.holder >= 0 {
		t.FinalHolder, t.FinalHolderLost = int64(g.holder)+1, g.ops[g.holder].lost
	}
	t.Injections = []Injection{}
	for _, in := range g.injected {
		t.Injections = append(t.Injections, g.label(in))
	}
	t.Linearizable, t.Why = verdict(t.Injections)
	return t
}

func (g *gen) label(in injRec) Injection {
	h, b := &g.ops[in.h], &g.ops[in.b]
	out := Injection{
		At: in.at, Op: int64(in.b) + 1, Client: int(b.client), Lost: b.lost,
		Holder: int64(in.h) + 1, HolderClient: int(h.client), HolderLost: h.lost, HolderGrant: h.apply,
	}
	margin := int64(g.cfg.Margin)
	switch {
	case h.lost && in.moveTo > 0:
		out.Label, out.MoveTo = Explainable, in.moveTo
		out.Why = fmt.Sprintf("the holder is a lost acquire: granted at %d instead of %d, its lease ends before the second grant", in.moveTo, h.apply)
	case h.lost:
		out.Label = Unknown
		out.Why = "the holder is a lost acquire whose grant the generator could not move clear of the second grant"
	case b.lost:
		out.Label = Unknown
		out.Why = "the second acquire's reply was lost: not proven either way"
	case h.ret >= b.call:
		out.Label = Unknown
		out.Why = "the two acquires overlap in time: not proven either way"
	case g.lease != history.Never && b.ret+margin >= h.call+g.lease:
		out.Label = Unknown
		out.Why = "the second acquire returned after the first lease could have run out (counted from its call, less the margin)"
	case h.relCall <= b.ret:
		out.Label = Unknown
		out.Why = "the holder's release was invoked before the second acquire returned"
	default:
		out.Label = Certain
		out.Why = fmt.Sprintf("client %d's acquire returned ok at %d; client %d's, invoked after it at %d, returned ok at %d, before that lease could end and before any release of it", h.client, h.ret, b.client, b.call, b.ret)
	}
	return out
}

// verdict is the truth of the whole history: No when some injection is
// Certain; Yes when there is none, or every one is Explainable and the
// stretches their linearizations change ([MoveTo, At]) are disjoint.
func verdict(ins []Injection) (string, string) {
	if len(ins) == 0 {
		return Yes, "no injection: the server simulated was correct"
	}
	var unknown int
	for _, in := range ins {
		switch in.Label {
		case Certain:
			return No, fmt.Sprintf("op %d's grant is a certain double grant", in.Op)
		case Unknown:
			unknown++
		}
	}
	if unknown > 0 {
		return UnknownTruth, fmt.Sprintf("%d injections are neither certain nor explainable", unknown)
	}
	s := append([]Injection(nil), ins...)
	sort.Slice(s, func(i, j int) bool { return s[i].MoveTo < s[j].MoveTo })
	for i := 1; i < len(s); i++ {
		if s[i].MoveTo <= s[i-1].At {
			return UnknownTruth, fmt.Sprintf("the explanations of ops %d and %d overlap", s[i-1].Op, s[i].Op)
		}
	}
	return Yes, fmt.Sprintf("all %d injections are explainable, each on its own stretch", len(ins))
}
