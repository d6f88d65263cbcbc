package checker

import (
	"fmt"
	"strings"

	"github.com/locktest/locktest/history"
)

// checkDoubleHolder finds holds of different clients that overlap: two
// clients that surely believed they held the lock at once. One anomaly per
// overlapping pair. The sweep keeps the holds still open at each start; each
// of them overlaps the new hold, so the work is O(holds + pairs) after the
// sort Holds did.
func checkDoubleHolder(f *facts) (Property, []Anomaly) {
	h, holds := f.h, f.holds
	p := Property{Name: KindDoubleHolder, Engine: "interval sweep", Status: Pass}
	var out []Anomaly
	var active []int // indices into holds, still open
	for i := range holds {
		b := &holds[i]
		kept := active[:0]
		for _, j := range active {
			if holds[j].End > b.Start {
				kept = append(kept, j)
			}
		}
		active = kept
		for _, j := range active {
			a := &holds[j]
			if a.Client == b.Client {
				continue // a restarted client's stale hold: not two clients
			}
			out = append(out, doubleHolderAnomaly(h, a, b))
		}
		if b.End > b.Start {
			active = append(active, i)
		}
	}
	p.Count = len(out)
	if len(out) > 0 {
		p.Status = Fail
	}
	return p, out
}

// doubleHolderAnomaly describes a, which started first, overlapping b.
func doubleHolderAnomaly(h *history.History, a, b *Hold) Anomaly {
	end := min(a.End, b.End)
	var sb strings.Builder
	fmt.Fprintf(&sb, "client %d acquired the lock at %s while client %d, which acquired it at %s",
		b.Client, at(b.Start), a.Client, at(a.Start))
	if ttl := h.Info.TTLMillis * 1e6; h.Info.Lease && ttl > 0 {
		if b.Start < a.AcquireCall+ttl {
			// b's grant (before b.Start) came before a's lease could expire
			// (no earlier than a.AcquireCall+ttl): the server broke it.
			fmt.Fprintf(&sb, " (lease %s, still valid until %s at least)", span(ttl), at(a.AcquireCall+ttl))
		} else {
			fmt.Fprintf(&sb, " (lease %s, so expired by %s at the latest)", span(ttl), at(a.Start+ttl))
		}
	}
	switch a.EndReason {
	case "release":
		fmt.Fprintf(&sb, ", still believed it held it until %s", at(a.End))
	case "client-exit":
		fmt.Fprintf(&sb, ", still believed it held it until its process ended at %s", at(a.End))
	default:
		fmt.Fprintf(&sb, ", still believed it held it at the end of the history (%s)", at(a.End))
	}
	if s := clientFaultSentence(h, a.Client, a.Start, end); s != "" {
		sb.WriteString("; " + s)
	}
	sb.WriteString(".")
	return Anomaly{
		Kind:        KindDoubleHolder,
		Clients:     []int{a.Client, b.Client},
		Start:       b.Start,
		End:         end,
		Ops:         []int64{a.AcquireOp, b.AcquireOp},
		Faults:      faultsDuring(h, b.Start, end),
		Explanation: sb.String(),
	}
}
