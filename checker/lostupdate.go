package checker

import (
	"fmt"

	"github.com/locktest/locktest/history"
)

// checkLostUpdate replays the accepted writes. Each client read the value
// and wrote it plus one, so a write that replaced anything but Value-1
// overwrote increments: a lost update. It returns the resource's final
// value (the last accepted write's Value, or the start value).
func checkLostUpdate(f *facts) (Property, []Anomaly, int64) {
	h, writes := f.h, f.writes
	p := Property{Name: string(KindLostUpdate), Engine: "resource replay", Status: Pass}
	start := h.Info.ResourceStart
	final := start
	if len(writes) == 0 {
		p.Status = Skipped
		p.Detail = "no writes to the resource"
		return p, nil, final
	}
	var out []Anomaly
	accepted, lostTotal := 0, int64(0)
	checked := 0
	// last is the last accepted write, other the last one by a client other
	// than last's: together they give the last write by anyone but X.
	last, other := -1, -1
	for _, i := range writes {
		op := &h.Ops[i]
		if op.Type != history.OK {
			continue
		}
		accepted++
		if op.Value != nil && op.Prev != nil {
			checked++
			read, prev := *op.Value-1, *op.Prev
			if prev != read {
				victim := other
				if last >= 0 && h.Ops[last].Client != op.Client {
					victim = last
				}
				a := Anomaly{
					Kind:    KindLostUpdate,
					Clients: []int{op.Client},
					Start:   op.Call,
					End:     op.Return,
					Ops:     []int64{op.OpID},
				}
				what := fmt.Sprintf("client %d read %d and wrote %d at %s, replacing %d", op.Client, read, *op.Value, at(op.Return), prev)
				if victim >= 0 {
					v := &h.Ops[victim]
					a.Clients = append(a.Clients, v.Client)
					a.Ops = append(a.Ops, v.OpID)
					a.Start = min(a.Start, v.Return)
					what += fmt.Sprintf(", which client %d had written at %s", v.Client, at(v.Return))
				}
				if n := prev - read; n > 0 {
					lostTotal += n
					what += fmt.Sprintf(": %s lost.", plural(int(n), "increment", "increments"))
				} else {
					what += fmt.Sprintf(": the resource held %d less than the client had read.", -n)
				}
				if s := clientFaultSentence(h, op.Client, op.Call, op.Return); s != "" {
					what += " Meanwhile " + s + "."
				}
				a.Explanation = what
				a.Faults = faultsDuring(h, a.Start, a.End)
				out = append(out, a)
			}
		}
		if op.Value != nil {
			final = *op.Value
		}
		if last >= 0 && h.Ops[last].Client != op.Client {
			other = last
		}
		last = i
	}
	expected := start + int64(accepted)
	p.Detail = fmt.Sprintf("final value %d, %d accepted writes from %d would give %d", final, accepted, start, expected)
	if final < expected && len(out) == 0 && checked < accepted {
		// The writes do not say what they replaced, but the total does.
		lw := &h.Ops[last]
		out = append(out, Anomaly{
			Kind:    KindLostUpdate,
			Clients: []int{lw.Client},
			Start:   h.Ops[writes[0]].Call,
			End:     lw.Return,
			Ops:     []int64{lw.OpID},
			Explanation: fmt.Sprintf("the resource ended at %d after %d accepted increments from %d: %s lost (the writes do not record what they replaced, so which ones is unknown).",
				final, accepted, start, plural(int(expected-final), "increment was", "increments were")),
		})
	}
	p.Count = len(out)
	if len(out) > 0 {
		p.Status = Fail
	}
	return p, out, final
}
