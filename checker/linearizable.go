package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/history"
)

// The linearizable property: can the lock operations (acquires and
// releases with their outcomes, indeterminate ones included) be ordered,
// each at a point inside its [invocation, return], so that a lock
// (lockModel: lease, reentrant, renewed) gives exactly the outcomes seen?
//
// The lock sweep (lockcheck.go) decides it by default; porcupine
// (porcupine.go), on the same model, where the sweep exceeds its search
// bound, or always with Options.Engine = EnginePorcupine.

// checkLinearizable decides the linearizable property.
func checkLinearizable(f *facts, opts Options) (Property, []Anomaly) {
	return checkLinearizableCtx(context.Background(), f, opts)
}

// checkLinearizableCtx decides the linearizable property; the lock sweep
// gives up when ctx is done or its budget (Options.SearchBudget) runs out.
//
// A proven double grant (provenDoubleGrant: two grants each returned while
// the other surely held the lock, whatever the open operations did) fails
// the property even where the sweep gives up; where the sweep decides, its
// verdict and witness (the first operation that cannot be placed) stand.
// searchStarted, when not nil, is called as the lock sweep starts its
// search: TestCheckContextCancelled cancels the check from it. Set only by
// sequential tests.
var searchStarted func()

func checkLinearizableCtx(ctx context.Context, f *facts, opts Options) (Property, []Anomaly) {
	h := withSessionEnds(f.h, f.holds)
	ops, dropped, m := prepareLock(h, int64(opts.Slack))
	if opts.Engine == EnginePorcupine {
		return checkPorcupine(h, ops, m, opts)
	}
	proof, proven := provenDoubleGrant(ops, m)
	limit, name := opts.SearchBudget, "budget"
	if proven && provenBudget < limit {
		// The verdict is certain: the sweep only looks for the first
		// operation that cannot be placed, a better witness.
		limit, name = provenBudget, "budget once a double grant is proven"
	}
	// The budget counts the CPU time the sweep gets (budget.go), so that
	// the verdict does not depend on the machine's load; cancellation
	// still stops it at once.
	b := startBudget(limit)
	defer b.stop()
	halt := func() bool { return ctx.Err() != nil || b.over() }
	if searchStarted != nil {
		searchStarted()
	}
	r := runLockSweepHalt(ops, dropped, m, opts, halt)
	b.stop()
	st := r.s.stats
	cpu, wall := b.spent()
	st.BudgetNs, st.CPUNs, st.WallNs = int64(limit), int64(cpu), int64(wall)
	if st.OutOfTime {
		st.OutOf = b.outName()
		if st.OutOf == "" {
			st.OutOf = "interrupted"
		}
	}
	p := Property{Name: "linearizable", Engine: EngineLock, Status: Pass, Search: &st}
	why := func() string {
		if st.OutOfTime && b.out == budgetLeft {
			return "the check was interrupted"
		}
		if st.OutOfTime {
			return "the lock sweep ran out of " + b.ranOut(name)
		}
		return fmt.Sprintf("the lock sweep exceeded its bound (%d configurations)", st.Bound)
	}
	switch {
	case r.window != nil:
		p.Status = Fail
		p.Count = 1
		p.Detail = r.window.detail()
		if proven {
			// Two grants make the shorter witness.
			p.Detail += "; a double grant proves it too"
			return p, []Anomaly{proof.anomaly(ops, h.Ops, h, m)}
		}
		return p, []Anomaly{r.window.anomaly(ops, h.Ops, h, m)}
	case st.Exceeded && proven:
		p.Status = Fail
		p.Count = 1
		p.Detail = fmt.Sprintf("%s at %s, after deciding %d returns; a double grant proves the history not linearizable whatever the indeterminate operations did",
			why(), at(st.ExceededAt), st.Forced+st.Searched)
		return p, []Anomaly{proof.anomaly(ops, h.Ops, h, m)}
	case st.Exceeded && ctx.Err() != nil:
		p.Status = Unknown
		p.Detail = fmt.Sprintf("%s at %s, after deciding %d returns", why(), at(st.ExceededAt), st.Forced+st.Searched)
		return p, nil
	case st.Exceeded:
		pp, as := checkPorcupine(h, ops, m, opts)
		pp.Engine = EnginePorcupine + " (fallback)"
		pp.Search = &st
		pp.Detail = fmt.Sprintf("%s at %s, after deciding %d returns; porcupine decided the whole history: %s",
			why(), at(st.ExceededAt), st.Forced+st.Searched, pp.Detail)
		return pp, as
	case r.s.failed:
		p.Status = Fail
		p.Count = 1
		p.Detail = r.s.statsDetail() + "; stopped at the first operation that cannot be placed"
		return p, []Anomaly{r.anomaly(h.Ops, h, witnessBudget)}
	case proven:
		// The sweep placed every operation, yet two grants cannot both
		// be placed: one of the two engines is wrong. Never a pass.
		p.Status = Unknown
		p.Detail = r.s.statsDetail() + "; but a double grant proves the history not linearizable: the engines disagree (a bug in the checker, please report it)"
		return p, []Anomaly{proof.anomaly(ops, h.Ops, h, m)}
	}
	p.Detail = r.s.statsDetail()
	return p, nil
}

// provenBudget caps the sweep's budget (CPU time) when a double grant
// already proves the history not linearizable.
const provenBudget = time.Second

// sweepRun is a finished lock sweep over a history.
type sweepRun struct {
	s  *sweep
	ow *owners
	// window, when set, is a relaxed window around where the beam passes
	// stopped that cannot be ordered (windowproof.go): the history is not
	// linearizable; s is then the last beam pass.
	window *windowFailure
}

// prepareLock converts h's lock operations and builds the model: the
// operations in order of invocation, less the failed acquires inside held
// windows (dropped counts them).
func prepareLock(h *history.History, slack int64) (ops []lockOp, dropped int, m lockModel) {
	// (Owners are unique per acquire: about one per two lock operations,
	// fewer with failed acquires, which name nobody.)
	ow := newOwners(len(h.Ops) / 4)
	ops = lockOps(h, ow)
	m = newLockModel(h.Info, slack, ow)
	ops, dropped = dropCovered(ops, windowsOf(ops, m))
	return ops, dropped, m
}

// passCapacity is the first pass's pool capacity (see sweep.capacity).
const passCapacity = 4

// runLockSweep decides ops in up to two passes.
//
// The first pass restricts the model and prunes approximately: a lost
// operation takes effect within opts.LostHorizon after its client gave up
// on it, pools with plenty left compare as equal, one client stands for
// all whose lost acquire no release could free, and a lost acquire's
// grant is kept only at its earliest and latest. Each of these only
// removes ways to order the history, so when the first pass reaches the
// end, a surviving configuration is a linearization of the full model:
// the history is linearizable, exactly. When it stops at an operation it
// cannot place and none of them came into play, that is exact too;
// otherwise the second pass, exact, decides.
func runLockSweep(ops []lockOp, dropped int, m lockModel, opts Options) sweepRun {
	return runLockSweepHalt(ops, dropped, m, opts, nil)
}

// runLockSweepHalt is runLockSweep, both passes giving up when halt (polled,
// nil for never) says so.
func runLockSweepHalt(ops []lockOp, dropped int, m lockModel, opts Options, halt func() bool) sweepRun {
	la := newLookahead(ops, m.ow)
	wp := newWindowProver(ops, m, opts, halt)
	if first, wf := firstPass(ops, m, opts, la, halt, wp); first != nil {
		first.stats.Dropped = dropped
		return sweepRun{s: first, ow: m.ow, window: wf}
	}
	exact := newSweep(m, opts.SearchBound)
	exact.halt = halt
	exact.mergeOrphans, exact.look = true, la
	exact.runAll(ops)
	exact.stats.Dropped = dropped
	exact.stats.Exact = true
	return sweepRun{s: exact, ow: m.ow}
}

// runAll reads ops, in order of invocation, to the end (or the first
// operation that cannot be placed, or the bound).
func (s *sweep) runAll(ops []lockOp) bool {
	s.nextCall = 0
	return s.runFrom(ops)
}

// statsDetail says how much of the history the sweep decided without
// search.
func (s *sweep) statsDetail() string {
	st := &s.stats
	read := st.Forced + st.Searched
	d := fmt.Sprintf("%d lock operations read", st.Ops)
	if st.Dropped > 0 {
		d += fmt.Sprintf(" (and %d failed acquires inside sure holds dropped)", st.Dropped)
	}
	if read == 0 {
		return d
	}
	d += fmt.Sprintf("; %d of %d returns (%.2f%%) decided with one configuration open", st.Forced, read, 100*float64(st.Forced)/float64(read))
	if st.Searched > 0 {
		d += fmt.Sprintf(", %d searched (at most %s open at once, %d built)", st.Searched, plural(st.MaxFrontier, "configuration", "configurations"), st.Explored)
	}
	if st.Exact {
		d += "; exact pass"
	} else if st.Beam > 0 && !st.Exceeded && !s.failed {
		resumed := ""
		if s.resumed > 0 {
			resumed = fmt.Sprintf(", resumed wider %s", plural(s.resumed, "time", "times"))
		}
		d += fmt.Sprintf("; first pass with a beam (%d configurations set aside%s; a pass is still a linearization)", st.Beam, resumed)
	}
	return d
}

// witnessBudget bounds the CPU time spent shrinking a witness (budget.go).
const witnessBudget = 2 * time.Second

// withSessionEnds returns h with, for a lock that dies with its client's
// session (RunInfo.Session), an indeterminate release by the holder where
// a hold ended with its client's process, or where a server fault that
// ends every session (sessionCut) struck during the hold: the server frees
// the lock when the connection closes or the session expires, at a moment
// the history does not record. One release per level the client held
// (reentrant locks). h itself when there is none to add.
func withSessionEnds(h *history.History, holds []Hold) *history.History {
	if !h.Info.Session {
		return h
	}
	var cuts []int64
	for _, f := range h.Faults {
		if sessionCut(h.Info, f) {
			cuts = append(cuts, f.Start)
		}
	}
	var ends []history.Operation
	nextID := int64(0)
	for i := range h.Ops {
		nextID = max(nextID, h.Ops[i].OpID)
	}
	for _, hd := range holds {
		t, why := history.Never, ""
		if hd.EndReason == "client-exit" {
			t, why = hd.End, endByExit
		}
		for _, c := range cuts {
			// A fault recorded while the acquire ran may have landed
			// after its grant (a kill is recorded as it is sent): the
			// lock may be gone from the hold's start on.
			if cutDuring(c, &hd) && c < t {
				t, why = max(c, hd.Start), endByServer
			}
		}
		if why == "" {
			continue
		}
		levels := 1
		if h.Info.Reentrant {
			levels = 0
			for i := hd.AcquireIndex; i < len(h.Ops) && h.Ops[i].Call < t; i++ {
				op := &h.Ops[i]
				if op.Client != hd.Client {
					continue
				}
				switch {
				case op.Op == history.Acquire && op.Type == history.OK:
					levels++
				case op.Op == history.Release && op.Type == history.OK:
					levels--
				}
			}
			levels = max(levels, 1)
		}
		for range levels {
			nextID++
			ends = append(ends, sessionEndOp(hd.Client, nextID, hd.Owner, t, history.Never, why))
		}
	}
	if len(ends) == 0 {
		return h
	}
	slices.SortStableFunc(ends, func(a, b history.Operation) int { return cmpInt64(a.Call, b.Call) })
	ops := make([]history.Operation, 0, len(h.Ops)+len(ends))
	k := 0
	for i := range h.Ops {
		for k < len(ends) && ends[k].Call < h.Ops[i].Call {
			ops = append(ops, ends[k])
			k++
		}
		ops = append(ops, h.Ops[i])
	}
	ops = append(ops, ends[k:]...)
	for i := range ops {
		ops[i].Index = i
	}
	h2 := *h
	h2.Ops = ops
	return &h2
}

// sessionEndOp is the indeterminate release, invoked at t by owner's
// client, by which the server frees a session lock whose session ended
// (withSessionEnds, Incremental.sessionEnd) for the reason why; completed
// is when its completion counts as recorded (history.Never for none).
func sessionEndOp(client int, opID int64, owner string, t, completed int64, why string) history.Operation {
	return history.Operation{
		Client: client, Op: history.Release, OpID: opID, Call: t, Return: history.Never,
		Type: history.Info, Owner: owner, ValidUntil: history.Never, Completed: completed,
		Error: why,
	}
}

// Why a session lock was freed without its holder's release.
const (
	endByExit   = "the client's process ended: the server frees its session's lock"
	endByServer = "a server fault ended every session: the lock went with its holder's"
)

// sessionCut reports whether fault f ended every session of a session
// lock that is not kept alive by heartbeats (MariaDB's FOR UPDATE and
// GET_LOCK live in the connection): a killed primary restarts with no
// connection (a killed replica had none of the clients'), a failover moves
// the clients to a server that never saw theirs. A fault that failed ended
// nothing. A lock kept alive by heartbeats (ZooKeeper, etcd) outlives a
// server fault by design: its session moves to another server.
func sessionCut(info history.RunInfo, f history.Fault) bool {
	if !info.Session || info.Renews || f.Failed {
		return false
	}
	switch f.Name {
	case "failover":
		return true
	case "kill":
		// One server, or the kill says it took the primary.
		return len(info.Servers) <= 1 || strings.HasSuffix(f.Detail, history.KilledPrimary)
	}
	return false
}

// cutDuring reports whether a session cut at c ended hd's session: it
// came after hd's acquire was asked and before its hold ended.
func cutDuring(c int64, hd *Hold) bool { return c >= hd.AcquireCall && c < hd.End }
