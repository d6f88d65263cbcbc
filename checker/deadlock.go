package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

// heldSpan is one interval of the union of the holds: some client surely
// held the lock throughout [Start, End). Last is the index of the hold that
// ended last, the lock's last sure holder when the span ends.
type heldSpan struct {
	Start, End int64
	Last       int
}

// unionHolds merges holds (sorted by start) into disjoint spans.
func unionHolds(holds []Hold) []heldSpan {
	var out []heldSpan
	for i := range holds {
		hd := &holds[i]
		if n := len(out); n > 0 && hd.Start <= out[n-1].End {
			if hd.End > out[n-1].End {
				out[n-1].End = hd.End
				out[n-1].Last = i
			}
			continue
		}
		out = append(out, heldSpan{Start: hd.Start, End: hd.End, Last: i})
	}
	return out
}

// deadlockThreshold is the shortest blocked period reported as a deadlock:
// the run's DeadlockMs, else two TTLs plus a second, else 5 s.
func deadlockThreshold(info history.RunInfo) int64 {
	switch {
	case info.DeadlockMs > 0:
		return info.DeadlockMs * 1e6
	case info.TTLMillis > 0:
		return 2*info.TTLMillis*1e6 + 1e9
	default:
		return 5e9
	}
}

// minDeadlockFailures is how many acquires must fail with "held" in a gap
// for it to count as a deadlock.
const minDeadlockFailures = 3

// checkDeadlock finds periods in which no client surely held the lock while
// acquires kept failing because it was held, for at least the threshold.
// The window of a deadlock runs from the first such failure's call to the
// last one's return, all inside one gap between the spans of the holds.
func checkDeadlock(f *facts, slack int64) (Property, []Anomaly) {
	h, holds, spans := f.h, f.holds, f.spans
	p := Property{Name: string(KindDeadlock), Engine: "interval sweep", Status: Pass}
	threshold := deadlockThreshold(h.Info)
	p.Detail = "threshold " + span(threshold)
	// Gap g lies between spans[g-1] (or the start) and spans[g] (or the
	// end). Ops come in order of call, so the gaps are visited in order and
	// each is finished when the next one starts.
	var out []Anomaly
	lost := lostAcquires(h)
	g, cur := 0, -1 // cur: the gap being filled, -1 none
	first, last, n := 0, 0, 0
	var refused []int // the refusals of the gap being filled
	explained := 0
	flush := func() {
		if cur < 0 || n < minDeadlockFailures {
			return
		}
		from, to := h.Ops[first].Call, h.Ops[last].Return
		if to-from < threshold {
			return
		}
		var prev *Hold
		if cur > 0 {
			prev = &holds[spans[cur-1].Last]
		}
		a := deadlockAnomaly(h, prev, from, to, n, cur == len(spans), h.Ops[first].OpID, h.Ops[last].OpID)
		if used, ok := explainByLost(h, refused, lost, slack); ok {
			// Unavailability, not a broken promise: every refusal fell
			// within a lease that a lost acquire may have been granted.
			a.Severity = SeverityInfo
			a.Explanation = fmt.Sprintf("unavailable %s; every refusal explained by %s that may have been granted (their answers were lost, so no client knew it held the lock). An availability finding, not a violation: %s",
				span(to-from), plural(len(used), "lost acquire", "lost acquires"), a.Explanation)
			for _, k := range used {
				a.Ops = append(a.Ops, h.Ops[k].OpID)
			}
			explained++
		} else if len(used) > 0 && !leaseExpires(h.Info) {
			a.Explanation += fmt.Sprintf(" %s may have taken it for good (the lock never expires).",
				plural(len(used), "A lost acquire", "Lost acquires"))
		}
		out = append(out, a)
	}
	for _, i := range f.heldFails {
		op := &h.Ops[i]
		for g < len(spans) && spans[g].Start <= op.Call {
			g++
		}
		// Now spans[g-1].Start <= Call < spans[g].Start.
		if g > 0 && op.Call < spans[g-1].End {
			continue // during a hold
		}
		if g < len(spans) && op.Return > spans[g].Start {
			continue // returned after the next hold began
		}
		if g != cur {
			flush()
			cur, first, last, n = g, i, i, 0
			refused = refused[:0]
		}
		refused = append(refused, i)
		if op.Return > h.Ops[last].Return {
			last = i
		}
		n++
	}
	flush()
	p.Count = len(out) - explained
	if p.Count > 0 {
		p.Status = Fail
	}
	if explained > 0 {
		p.Detail += fmt.Sprintf("; %s explained by lost acquires that may have been granted (availability, not a violation)",
			plural(explained, "stretch of unavailability", "stretches of unavailability"))
	}
	return p, out
}

// leaseExpires reports whether a lock taken by a lost acquire frees itself:
// a lease that nobody renews (a renewed lease lives while its holder's
// process does, and a lock without expiry is held for good).
func leaseExpires(info history.RunInfo) bool {
	return info.Lease && info.TTLMillis > 0 && !info.Renews
}

// lostAcquires returns the indices of h's lost (indeterminate) acquires,
// in order of invocation.
func lostAcquires(h *history.History) []int {
	var out []int
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Op == history.Acquire && op.Type == history.Info {
			out = append(out, i)
		}
	}
	return out
}

// explainByLost reports whether every refusal in refused (indices of
// acquires that failed "held", in order of invocation) may have met a
// lock held by a lost acquire of lost: one granted at some g between its
// invocation and the time its client gave up on it (Completed), holding
// the lock over [g, g + TTL + slack] on a lease that expires. Each lost
// acquire is granted once, so it explains the refusals of one lease; they
// are assigned greedily, the grant as late as the first refusal it
// explains allows (refusals taken by return). It returns the lost acquires used (also when some
// refusal is left unexplained, or the lock never expires: then ok is
// false).
func explainByLost(h *history.History, refused, lost []int, slack int64) (used []int, ok bool) {
	if len(lost) == 0 {
		return nil, false
	}
	expires := leaseExpires(h.Info)
	life := h.Info.TTLMillis*1e6 + slack
	taken := map[int]bool{}
	g, end := int64(0), int64(-1) // the current grant's lease [g, end]
	ok = expires
	// By return: the refusal that returns first is explained by a grant
	// as late as it allows, which covers the most of those after it (as
	// stabbing intervals with the fewest points).
	byRet := slices.Clone(refused)
	slices.SortStableFunc(byRet, func(a, b int) int { return cmpInt64(h.Ops[a].Return, h.Ops[b].Return) })
	for _, r := range byRet {
		op := &h.Ops[r]
		if expires && max(op.Call, g) <= min(op.Return, end) {
			continue
		}
		// The lost acquire invoked by op.Return whose grant can come the
		// latest, no later than op.Return.
		best, bestG := -1, int64(-1)
		for _, k := range lost {
			l := &h.Ops[k]
			if l.Call > op.Return {
				break
			}
			if taken[k] {
				continue
			}
			lg := min(l.Completed, op.Return)
			if expires && satAdd(lg, life) < op.Call {
				continue // its lease surely ended before op was invoked
			}
			if lg > bestG {
				best, bestG = k, lg
			}
		}
		if best < 0 {
			ok = false
			if !expires {
				break
			}
			continue
		}
		taken[best] = true
		used = append(used, best)
		if !expires {
			// Held for good: one lost grant explains every later refusal.
			g, end = bestG, history.Never
			ok = false
			break
		}
		g, end = bestG, satAdd(bestG, life)
	}
	return used, ok
}

func deadlockAnomaly(h *history.History, prev *Hold, from, to int64, n int, toEnd bool, firstOp, lastOp int64) Anomaly {
	a := Anomaly{
		Kind:   KindDeadlock,
		Start:  from,
		End:    to,
		Ops:    []int64{firstOp, lastOp},
		Faults: faultsDuring(h, from, to),
	}
	var sb strings.Builder
	if prev == nil {
		sb.WriteString("no client surely held the lock since the start of the run")
		a.Clients = []int{}
	} else {
		a.Clients = []int{prev.Client}
		a.Ops = append([]int64{prev.AcquireOp}, a.Ops...)
		// What happened to the lock during the last hold explains the
		// deadlock as much as what happened after it.
		a.Faults = faultsDuring(h, prev.Start, to)
		switch prev.EndReason {
		case "client-exit":
			fmt.Fprintf(&sb, "client %d crashed at %s holding the lock", prev.Client, at(prev.End))
			if f := crashFault(h, prev); f != "" {
				fmt.Fprintf(&sb, " (%s)", f)
			}
		case "release":
			outcome := "was indeterminate"
			if rel := &h.Ops[prev.ReleaseIndex]; rel.Type == history.OK {
				outcome = "returned ok"
			} else if rel.Type == history.Fail {
				outcome = "failed (" + rel.Reason + ")"
			}
			fmt.Fprintf(&sb, "client %d, the last sure holder, called release at %s, which %s", prev.Client, at(prev.End), outcome)
		case "declined":
			fmt.Fprintf(&sb, "client %d, the last sure holder, stopped using the lock at %s, knowing it lost", prev.Client, at(prev.End))
		case "validity":
			fmt.Fprintf(&sb, "client %d, the last sure holder, stopped using the lock when its validity ended at %s", prev.Client, at(prev.End))
		default:
			fmt.Fprintf(&sb, "client %d held the lock", prev.Client)
		}
	}
	if toEnd {
		fmt.Fprintf(&sb, " and nobody could acquire it for the remaining %s", span(to-from))
	} else {
		fmt.Fprintf(&sb, " and nobody could acquire it for %s", span(to-from))
	}
	fmt.Fprintf(&sb, " (%d acquires failed: held, %s–%s).", n, at(from), at(to))
	if prev != nil {
		for _, f := range h.Faults {
			if p, ok := h.Promotion(f); ok && !history.Late(p) && p.Time >= prev.Start && p.Time <= from {
				fmt.Fprintf(&sb, " A failover promoted a replica at %s, during or after client %d's last hold: the new primary had what the replica had applied, which may be an older state of the lock than the one its clients saw (a grant it still has, a release it lost).", at(p.Time), prev.Client)
				break
			}
		}
	}
	for _, f := range h.Faults {
		if f.Name == "crash-client" && gap(f) && f.Start >= from-h.Info.DeadlockMs*1e6 && f.Start <= to {
			fmt.Fprintf(&sb, " Client %d %s, in an acquire that may have set the key: a key whose holder dies before it can give it a TTL stays forever.", f.Client, faultVerb(f))
			break
		}
	}
	a.Explanation = sb.String()
	return a
}

// crashFault names the fault that ended hd's process, if one targeted it
// around then.
func crashFault(h *history.History, hd *Hold) string {
	for _, f := range h.Faults {
		if c, ok := clientTarget(f.Target); ok && !f.Failed && c == hd.Client && f.Start >= hd.Start && f.Start <= hd.End {
			return f.Name
		}
	}
	return ""
}
