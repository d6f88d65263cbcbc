package checker

import (
	"slices"
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
// With a reentrant lock (RunInfo.Reentrant) a client may acquire again while
// it holds the lock and must release as many times: the hold then ends at
// the release that brings its depth back to zero. Otherwise a successful
// acquire while holding (a reentrant call on a lock that is not) changes
// nothing and the first release ends the hold.
//
// A client that is restarted (a new client-start event for the same client
// number) is a new process: a hold of the old process ends when that process
// ended, and the new process's acquires and releases do not continue it.
//
// A client that checks its own validity (RunInfo.ChecksValidity: its
// successful acquire carries Valid, so Operation.ValidUntil is set) stops
// using the resource once its validity ends. Its hold ends at
// min(release invocation, max(ValidUntil, completion of the last read or
// write with outcome ok that it performed during the hold)): a careful
// client frozen past its validity that then declines to use the resource
// (its reads answer "not-held") and releases held the lock only until its
// validity ended.
//
// The controller records both ends, so a hold lies inside the window in
// which the server really kept the client's key: overlapping holds of two
// clients are two clients that surely held the lock at once.
func Holds(h *history.History) []Hold {
	return newFacts(h).holds
}

// holdsOf computes the holds from the positions of the acquires and
// releases in h.Ops, of which n are successful acquires. uses are the
// successful reads and writes, in order of invocation, for the validity
// cut, and declines the reads and writes declined as not-held (both nil
// unless the run's clients check their validity).
func holdsOf(h *history.History, lock []int, n int, uses, declines []int) []Hold {
	lives := clientLives(h)
	out := make([]Hold, 0, n)
	type open struct {
		Hold
		lifeEnd int64 // end of the process that holds it, Never if unknown
		depth   int   // successful acquires not yet released (reentrant)
		ok      bool
	}
	var dense []open // by client number, for the usual small numbers
	sparse := map[int]*open{}
	slot := func(c int) *open {
		if c >= 0 && c < 1<<16 {
			dense = grown(dense, c)
			return &dense[c]
		}
		o, ok := sparse[c]
		if !ok {
			o = &open{}
			sparse[c] = o
		}
		return o
	}
	closeAt := func(o *open, end int64, reason string) {
		o.End, o.EndReason, o.BelievedEnd = end, reason, end
		out = append(out, o.Hold)
		o.ok = false
	}
	for _, i := range lock {
		op := &h.Ops[i]
		o := slot(op.Client)
		if o.ok && o.lifeEnd < op.Call {
			// The process that held it ended; this is a new one.
			closeAt(o, o.lifeEnd, "client-exit")
		}
		switch op.Op {
		case history.Acquire:
			if op.Type != history.OK {
				continue
			}
			if o.ok {
				// Reentrant: the outer hold goes on.
				o.depth++
				if op.ValidUntil != history.Never {
					o.ValidUntil = max(o.ValidUntil, op.ValidUntil)
				}
				continue
			}
			*o = open{
				Hold: Hold{
					Client: op.Client, Owner: op.Owner, Token: op.Token,
					Shared: op.Mode == history.ModeRead,
					Start:  op.Return, End: history.Never,
					AcquireOp: op.OpID, AcquireCall: op.Call,
					AcquireIndex: i, ReleaseIndex: -1,
				},
				lifeEnd: lifeEnd(lives[op.Client], op.Return),
				depth:   1,
				ok:      true,
			}
			if op.ValidUntil != history.Never {
				o.ValidUntil = op.ValidUntil
			}
		case history.Release:
			if !o.ok {
				continue
			}
			if o.depth--; h.Info.Reentrant && o.depth > 0 {
				continue // an inner release
			}
			o.ReleaseOp = op.OpID
			o.ReleaseIndex = i
			closeAt(o, op.Call, "release")
		}
	}
	finish := func(o *open) {
		if !o.ok {
			return
		}
		if o.lifeEnd != history.Never {
			closeAt(o, o.lifeEnd, "client-exit")
		} else {
			closeAt(o, h.End, "end-of-history")
		}
	}
	for i := range dense {
		finish(&dense[i])
	}
	for _, o := range sparse {
		finish(o)
	}
	if h.Info.ChecksValidity {
		cutAtValidity(h, out, uses, declines)
	}
	// Holds close in order of their ends: nearly sorted by start already.
	// Sorted by index, then moved into place once, cycle by cycle: a Hold
	// is large to swap.
	cmp := func(a, b *Hold) int {
		if a.Start != b.Start {
			return cmpInt64(a.Start, b.Start)
		}
		return a.Client - b.Client
	}
	if slices.IsSortedFunc(out, func(a, b Hold) int { return cmp(&a, &b) }) {
		return out
	}
	idx := make([]int32, len(out))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int { return cmp(&out[i], &out[j]) })
	// out[k] must become out[idx[k]]: follow each cycle once.
	for k := range idx {
		if idx[k] == int32(k) || idx[k] < 0 {
			continue
		}
		tmp := out[k]
		j := k
		for {
			from := int(idx[j])
			idx[j] = -1
			if from == k {
				out[j] = tmp
				break
			}
			out[j] = out[from]
			j = from
		}
	}
	return out
}

// clientLives groups the client processes by client number, in order of
// start.
func clientLives(h *history.History) map[int][]history.Client {
	if len(h.Clients) == 0 {
		return nil
	}
	m := make(map[int][]history.Client)
	for _, c := range h.Clients {
		m[c.ID] = append(m[c.ID], c)
	}
	for _, l := range m {
		sort.SliceStable(l, func(i, j int) bool { return l[i].Start < l[j].Start })
	}
	// A process killed by the crash-client fault stopped using the lock
	// when the kill was sent (the fault's start), not when the controller
	// saw it exit: the kernel closes its connections in between, and a
	// server that frees a session's locks then (MariaDB's GET_LOCK, a
	// transaction's row lock) may grant the lock before the exit is seen.
	for _, f := range h.Faults {
		if f.Name != "crash-client" || f.Client <= 0 {
			continue
		}
		l := m[f.Client]
		for k := range l {
			if l[k].Start <= f.Start && f.Start < l[k].End {
				l[k].End = f.Start
				break
			}
		}
	}
	return m
}

// lifeEnd returns when the process that was client's at time t ended, or
// Never when it outlived the history or the history does not say.
func lifeEnd(lives []history.Client, t int64) int64 {
	end := history.Never
	for _, l := range lives {
		if l.Start > t {
			break
		}
		end = l.End
	}
	if end < t {
		// t lies after the end of the last process that started before
		// it: the history is inconsistent; do not cut the hold short.
		return history.Never
	}
	return end
}

// cutAtValidity ends each hold that carries a validity at
// max(ValidUntil, completion of the client's last successful read or write
// during the hold), when that comes before the hold's end. A hold without
// a validity during which the client declined to use the resource (its
// lock told it the lock was lost: zk-strict after a suspended session)
// ends the same way at max(its start, that last successful use): the
// client surely believed it held the lock only until then. uses and
// declines are in order of invocation.
func cutAtValidity(h *history.History, holds []Hold, uses, declines []int) {
	byClient := func(ops []int) map[int][]int {
		m := map[int][]int{}
		for _, i := range ops {
			c := h.Ops[i].Client
			m[c] = append(m[c], i)
		}
		return m
	}
	used, declined := byClient(uses), byClient(declines)
	// before returns the last of ops (one client's, by invocation) invoked
	// in [from, to), or nil.
	before := func(ops []int, from, to int64) *history.Operation {
		j := sort.Search(len(ops), func(j int) bool { return h.Ops[ops[j]].Call >= to })
		if j > 0 && h.Ops[ops[j-1]].Call >= from {
			return &h.Ops[ops[j-1]]
		}
		return nil
	}
	for k := range holds {
		hd := &holds[k]
		end, reason := hd.ValidUntil, "validity"
		if end == 0 {
			if before(declined[hd.Client], hd.Start, hd.BelievedEnd) == nil {
				continue
			}
			end, reason = hd.Start, "declined"
		}
		if u := before(used[hd.Client], hd.Start, hd.BelievedEnd); u != nil {
			end = max(end, u.Return)
		}
		if end < hd.End {
			hd.End, hd.EndReason = end, reason
		}
	}
}
