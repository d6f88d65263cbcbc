package checker

import (
	"sort"

	"github.com/locktest/locktest/history"
)

// Holds returns every interval during which a client surely believed it held
// the lock, sorted by start. A hold starts when a successful acquire returns
// and ends when the same client invokes its next release (whatever that
// release's outcome), when the client's process ends, or at the end of the
// history. Indeterminate acquires never start a hold: the client does not
// believe it holds the lock.
//
// The controller records both ends, so a hold lies inside the window in
// which the server really kept the client's key: overlapping holds of two
// clients are two clients that surely held the lock at once.
func Holds(h *history.History) []Hold {
	var out []Hold
	open := map[int]*Hold{}
	for i := range h.Ops {
		o := &h.Ops[i]
		switch o.Op {
		case history.Acquire:
			if o.Type != history.OK {
				continue
			}
			if _, held := open[o.Client]; held {
				// Reentrant acquire: the outer hold goes on.
				continue
			}
			open[o.Client] = &Hold{
				Client: o.Client, Owner: o.Owner, Token: o.Token,
				Start: o.Return, End: history.Never,
				AcquireOp: o.OpID, AcquireCall: o.Call,
			}
		case history.Release:
			hd, held := open[o.Client]
			if !held {
				continue
			}
			hd.End = o.Call
			hd.ReleaseOp = o.OpID
			hd.EndReason = "release"
			out = append(out, *hd)
			delete(open, o.Client)
		}
	}
	for c, hd := range open {
		if end := h.ClientEnd(c); end != history.Never && end >= hd.Start {
			hd.End = end
			hd.EndReason = "client-exit"
		} else {
			hd.End = h.End
			hd.EndReason = "end-of-history"
		}
		out = append(out, *hd)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].Client < out[j].Client
	})
	return out
}
