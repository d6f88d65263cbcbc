package checker

import (
	"fmt"

	"github.com/locktest/locktest/history"
)

// checkReleaseOKOnExpired finds, in lease runs, releases that were told ok
// although the client's lease was gone: either the server says it removed
// nothing (Removed "-"), or it does not say and the release was called after
// the lease had surely expired (acquire return + TTL + slack). Foreign
// releases are left to their own check. When the lease is renewed while its
// holder runs (RunInfo.Renews) its end is not in the history, so only the
// server's own account (a) counts.
func checkReleaseOKOnExpired(f *facts, slack int64) (Property, []Anomaly) {
	h, holds := f.h, f.holds
	p := Property{Name: string(KindReleaseOKOnExpired), Engine: "interval sweep", Status: Pass}
	if !h.Info.Lease {
		p.Status = Skipped
		p.Detail = "the lock has no lease"
		return p, nil
	}
	ttl := h.Info.TTLMillis * 1e6
	var out []Anomaly
	// (a) the server removed nothing.
	var ended map[int]*Hold // release index -> the hold it ended
	for _, i := range f.releases {
		op := &h.Ops[i]
		if op.Type != history.OK || op.Removed != "-" {
			continue
		}
		if ended == nil {
			ended = map[int]*Hold{}
			for k := range holds {
				if holds[k].ReleaseIndex >= 0 {
					ended[holds[k].ReleaseIndex] = &holds[k]
				}
			}
		}
		a := Anomaly{
			Kind:    KindReleaseOKOnExpired,
			Clients: []int{op.Client},
			Start:   op.Call,
			End:     op.Return,
			Ops:     []int64{op.OpID},
			Faults:  faultsDuring(h, op.Call, op.Return),
			Explanation: fmt.Sprintf("client %d's release, called at %s, returned ok at %s, yet the server removed nothing: the client's key was already gone",
				op.Client, at(op.Call), at(op.Return)),
		}
		if hd, ok := ended[i]; ok {
			a.Ops = []int64{hd.AcquireOp, op.OpID}
			if ttl > 0 {
				a.Explanation += fmt.Sprintf(" (acquired at %s, TTL %s)", at(hd.Start), span(ttl))
			}
			if s := clientFaultSentence(h, op.Client, hd.Start, op.Call); s != "" {
				a.Explanation += "; " + s
			}
		}
		a.Explanation += "."
		out = append(out, a)
	}
	// (b) the server does not say, but the lease had surely expired.
	if ttl > 0 && !h.Info.Renews {
		for k := range holds {
			hd := &holds[k]
			if hd.ReleaseIndex < 0 {
				continue
			}
			op := &h.Ops[hd.ReleaseIndex]
			if op.Type != history.OK || op.Removed != "" {
				continue
			}
			expiry := hd.Start + ttl
			if op.Call <= expiry+slack {
				continue
			}
			out = append(out, Anomaly{
				Kind:    KindReleaseOKOnExpired,
				Clients: []int{op.Client},
				Start:   op.Call,
				End:     op.Return,
				Ops:     []int64{hd.AcquireOp, op.OpID},
				Faults:  faultsDuring(h, hd.Start, op.Return),
				Explanation: fmt.Sprintf("client %d's release, called at %s, returned ok at %s, but its lease (acquired at %s, TTL %s) had expired by %s at the latest, %s before the release.",
					op.Client, at(op.Call), at(op.Return), at(hd.Start), span(ttl), at(expiry), span(op.Call-expiry)),
			})
		}
	}
	sortAnomalies(out)
	p.Count = len(out)
	if len(out) > 0 {
		p.Status = Fail
	}
	return p, out
}
