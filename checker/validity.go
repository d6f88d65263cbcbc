package checker

import (
	"fmt"
	"sort"

	"github.com/locktest/locktest/history"
)

// checkUsedAfterValidity finds, in runs whose clients check their own lease
// validity (RunInfo.ChecksValidity), reads and writes with outcome ok that
// completed after the client's validity had ended (Hold.ValidUntil, plus
// slack for the rounding of Valid to whole milliseconds and the delay of the
// client's answer). The controller performs a read or write when the client
// answers it, so such a client used the resource when, by its own account,
// it no longer held the lock: a bug of the client (typically it checked its
// validity, was paused, then used the resource), whatever the lock did.
func checkUsedAfterValidity(f *facts, slack int64) (Property, []Anomaly) {
	h := f.h
	p := Property{Name: string(KindUsedAfterValidity), Engine: "validity replay", Status: Pass}
	if !h.Info.ChecksValidity {
		p.Status = Skipped
		p.Detail = "the clients do not check their lease validity"
		return p, nil
	}
	byClient := map[int][]*Hold{}
	carry := 0
	for k := range f.holds {
		hd := &f.holds[k]
		if hd.ValidUntil != 0 {
			byClient[hd.Client] = append(byClient[hd.Client], hd)
			carry++
		}
	}
	var out []Anomaly
	for _, i := range f.uses {
		op := &h.Ops[i]
		hds := byClient[op.Client]
		// The hold in which the use was invoked: the last one started by then.
		k := sort.Search(len(hds), func(k int) bool { return hds[k].Start > op.Call })
		if k == 0 {
			continue
		}
		hd := hds[k-1]
		if op.Call >= hd.BelievedEnd || op.Return <= hd.ValidUntil+slack {
			continue
		}
		verb := "read"
		if op.Op == history.Write {
			verb = "wrote"
		}
		expl := fmt.Sprintf("client %d %s the resource at %s, %s after its own validity for the lock ended (acquired at %s, valid until %s by its own account): a client that checks its validity must stop using the resource once it ends, and this one did not",
			op.Client, verb, at(op.Return), span(op.Return-hd.ValidUntil), at(hd.Start), at(hd.ValidUntil))
		if s := clientFaultSentence(h, op.Client, hd.Start, op.Return); s != "" {
			expl += "; " + s
		}
		out = append(out, Anomaly{
			Kind:        KindUsedAfterValidity,
			Clients:     []int{op.Client},
			Start:       hd.ValidUntil,
			End:         op.Return,
			Ops:         []int64{hd.AcquireOp, op.OpID},
			Faults:      faultsDuring(h, hd.ValidUntil, op.Return),
			Explanation: expl + ".",
		})
	}
	sortAnomalies(out)
	p.Count = len(out)
	p.Detail = plural(carry, "hold carries", "holds carry") + " a validity"
	if len(out) > 0 {
		p.Status = Fail
	}
	return p, out
}
