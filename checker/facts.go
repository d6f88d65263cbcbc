package checker

import (
	"slices"

	"github.com/locktest/locktest/history"
)

// facts is what the checks share, gathered in one pass over the operations
// (each check then walks only the operations it reads): positions in
// History.Ops by kind, in order of invocation, the holds and their union.
type facts struct {
	h         *history.History
	lock      []int // acquires and releases
	releases  []int
	writes    []int // completed writes, in the order the resource applied them
	heldFails []int // acquires that failed because the lock was held
	uses      []int // successful reads and writes (only when clients check their validity)
	declines  []int // reads and writes the client declined, knowing the lock lost (idem)
	holds     []Hold
	spans     []heldSpan
	counts    Counts // all but ResourceFinal, FaultsOnHolder and the hold totals
}

func newFacts(h *history.History) *facts {
	// One allocation each, rather than growing: lock operations are most
	// operations, held failures most of those with many clients (87% of a
	// 1M-operation history with 50 clients); the room they leave unused is
	// never touched.
	f := &facts{h: h, lock: make([]int, 0, len(h.Ops)), heldFails: make([]int, 0, len(h.Ops))}
	c := &f.counts
	c.Ops, c.Faults, c.DurationNs, c.ResourceFinal = len(h.Ops), len(h.Faults), h.End, h.Info.ResourceStart
	var acquired clientSet
	writesSorted := true
	for i := range h.Ops {
		op := &h.Ops[i]
		switch op.Op {
		case history.Acquire:
			f.lock = append(f.lock, i)
			c.Acquires++
			switch op.Type {
			case history.OK:
				c.AcquiresOK++
				acquired.add(op.Client)
			case history.Fail:
				c.AcquiresFail++
				if op.Reason == history.ReasonHeld {
					f.heldFails = append(f.heldFails, i)
				}
			default:
				c.AcquiresInfo++
			}
		case history.Release:
			f.lock = append(f.lock, i)
			f.releases = append(f.releases, i)
			c.Releases++
			switch op.Type {
			case history.OK:
				c.ReleasesOK++
			case history.Fail:
				c.ReleasesFail++
			default:
				c.ReleasesInfo++
			}
		case history.Read:
			f.addUse(i)
		case history.Write:
			f.addUse(i)
			c.Writes++
			switch {
			case op.Type == history.OK:
				c.WritesAccepted++
			case op.Type == history.Fail && op.Reason == history.ReasonStaleToken:
				c.WritesRejected++
			}
			if op.Return == history.Never {
				break // never answered, never applied
			}
			if n := len(f.writes); n > 0 && h.Ops[f.writes[n-1]].Return > op.Return {
				writesSorted = false
			}
			f.writes = append(f.writes, i)
		}
	}
	c.ClientsAcquired = acquired.n
	if !writesSorted {
		sortByReturn(h, f.writes)
	}
	f.holds = holdsOf(h, f.lock, c.AcquiresOK, f.uses, f.declines)
	f.spans = unionHolds(f.holds)
	for _, s := range f.spans {
		c.HeldNs += s.End - s.Start
	}
	c.ShortGrants, c.MissingVotes = missingVotes(h)
	return f
}

// addUse notes read or write i of a client that checks whether it still
// holds the lock: a successful one, or one it declined (not-held).
func (f *facts) addUse(i int) {
	op := &f.h.Ops[i]
	switch {
	case !f.h.Info.ChecksValidity:
	case op.Type == history.OK:
		f.uses = append(f.uses, i)
	case op.Type == history.Fail && op.Reason == history.ReasonNotHeld:
		f.declines = append(f.declines, i)
	}
}

// sortByReturn orders writes by completion time, which the controller
// records atomically with the write; ties, which the recorder never
// produces, by invocation.
func sortByReturn(h *history.History, ws []int) {
	slices.SortStableFunc(ws, func(a, b int) int {
		if c := cmpInt64(h.Ops[a].Return, h.Ops[b].Return); c != 0 {
			return c
		}
		return a - b
	})
}
