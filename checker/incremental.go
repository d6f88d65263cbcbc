package checker

import (
	"fmt"
	"maps"
	"slices"

	"github.com/locktest/locktest/history"
)

// Incremental checks the linearizable property while the history is being
// recorded: fed the events as they happen, it reports the first operation
// that cannot be placed as soon as that is certain.
//
// It runs the lock sweep online. The sweep can read an event at time t only
// once every lock operation invoked by t has completed (it must know their
// outcomes to place them), so a violation is reported once the operations
// running around it have answered: an operation still running holds the
// report back for as long as it runs (a client paused in the middle of an
// acquire, for instance). Operations of a client whose process ends are
// indeterminate from then on, and at the run's end every operation still
// running is.
//
// Like runLockSweep, the online sweep first runs restricted (lost
// operations take effect within Options.LostHorizon of being given up, a
// few approximate prunes): when it cannot place an operation, an exact
// sweep over the history so far confirms it before anything is reported,
// so a report is always certain. When the exact sweep exceeds its bound,
// nothing is reported and Result says the property is unknown.
//
// An Incremental is not safe for concurrent use.
type Incremental struct {
	opts Options
	h    *history.History // Info, the lock operations so far (Ops) and the faults
	ow   *owners
	m    lockModel
	s    *sweep

	open   map[int64]int   // OpID -> position in h.Ops, not completed yet
	faults map[int64]int   // FaultID -> position in h.Faults
	byCli  map[int][]int64 // client -> its open OpIDs
	queue  []int           // positions in h.Ops not yet read by the sweep, by invocation
	held   map[int]*held   // client -> what it believes it holds (RunInfo.Session runs)
	// lastCut is when the last fault that ended every session began
	// (sessionCut), -1 before any.
	lastCut int64
	last    int64 // time of the latest event
	ended   bool

	verdict Status // Pass while nothing is known against; Fail or Unknown once decided
	found   []Anomaly
	detail  string
}

// held is a client's hold as an Incremental tracks it for a session lock.
type held struct {
	owner string
	depth int
}

// NewIncremental returns a checker for a run with the given header.
func NewIncremental(info history.RunInfo, opts Options) *Incremental {
	opts = opts.withDefaults()
	ow := newOwners(0)
	m := newLockModel(info, int64(opts.Slack), ow)
	s := newSweep(m, opts.SearchBound)
	s.win = newWindowTracker(m)
	s.capacity, s.horizon = passCapacity, int64(opts.LostHorizon)
	return &Incremental{
		opts:    opts,
		h:       &history.History{Info: info, Truncated: true},
		ow:      ow,
		m:       m,
		s:       s,
		open:    map[int64]int{},
		faults:  map[int64]int{},
		byCli:   map[int][]int64{},
		held:    map[int]*held{},
		lastCut: -1,
		verdict: Pass,
	}
}

// Add feeds the next event (in the order recorded) and returns the
// non-linearizable anomaly if this event made it certain; nil otherwise.
// It reports at most one anomaly in all: after it, Add only records.
func (in *Incremental) Add(e history.Event) []Anomaly {
	in.last = max(in.last, e.Time)
	if e.Time > in.h.End {
		in.h.End = e.Time
	}
	switch e.Type {
	case history.Invoke:
		if e.Op != history.Acquire && e.Op != history.Release {
			return nil
		}
		if e.Op == history.Release {
			in.released(e.Client)
		}
		in.open[e.OpID] = len(in.h.Ops)
		in.byCli[e.Client] = append(in.byCli[e.Client], e.OpID)
		in.queue = append(in.queue, len(in.h.Ops))
		in.h.Ops = append(in.h.Ops, history.Operation{
			Client: e.Client, Op: e.Op, OpID: e.OpID, Call: e.Time,
			Return: history.Never, Completed: history.Never, Type: history.Info, ValidUntil: history.Never,
			Owner: e.Owner, Mode: e.Mode, Index: len(in.h.Ops),
		})
	case history.OK, history.Fail, history.Info:
		i, ok := in.open[e.OpID]
		if !ok {
			return nil // a read or a write, or unknown
		}
		in.complete(i, e)
	case history.ClientExit:
		in.sessionEnd(e.Client, e.Time, endByExit)
		// The process's running operations never answer: indeterminate.
		for _, id := range in.byCli[e.Client] {
			if i, ok := in.open[id]; ok {
				in.complete(i, history.Event{Type: history.Info, Time: e.Time, Error: "client exited"})
			}
		}
	case history.FaultStart:
		in.faults[e.FaultID] = len(in.h.Faults)
		in.h.Faults = append(in.h.Faults, history.Fault{ID: e.FaultID, Name: e.Fault, Target: e.Target, Client: e.Client, Detail: e.Detail, Start: e.Time, End: history.Never})
		if e.Fault == "crash-client" && e.Client > 0 {
			in.sessionEnd(e.Client, e.Time, endByExit) // as Holds ends the hold (clientLives)
		}
		// A fault that ends every session frees what is held now, and
		// what an acquire running now is granted (withSessionEnds' rule).
		// Whether it failed is not known yet: the online check takes it
		// as struck, and may see a violation later than Check would.
		if sessionCut(in.h.Info, in.h.Faults[len(in.h.Faults)-1]) {
			in.lastCut = e.Time
			for _, c := range slices.Sorted(maps.Keys(in.held)) {
				in.sessionEnd(c, e.Time, endByServer)
			}
		}
	case history.FaultEnd:
		if i, ok := in.faults[e.FaultID]; ok {
			in.h.Faults[i].End = e.Time
		}
	case history.RunEnd:
		in.ended = true
		in.h.Truncated = false
		for _, i := range in.open {
			in.h.Ops[i].Completed = e.Time
		}
		clear(in.open)
	}
	return in.advance()
}

func (in *Incremental) complete(i int, e history.Event) {
	o := &in.h.Ops[i]
	delete(in.open, o.OpID)
	ids := in.byCli[o.Client]
	for k, id := range ids {
		if id == o.OpID {
			in.byCli[o.Client] = append(ids[:k], ids[k+1:]...)
			break
		}
	}
	o.Type, o.Completed = e.Type, e.Time
	if e.Type != history.Info {
		o.Return = e.Time
	}
	if e.Owner != "" {
		o.Owner = e.Owner
	}
	o.Removed, o.Reason, o.Error = e.Removed, e.Reason, e.Error
	if o.Op == history.Acquire && o.Type == history.OK && in.h.Info.Session {
		if h := in.held[o.Client]; h != nil && in.h.Info.Reentrant {
			h.depth++
		} else if h == nil {
			in.held[o.Client] = &held{owner: o.Owner, depth: 1}
		}
		if in.lastCut >= o.Call {
			in.sessionEnd(o.Client, e.Time, endByServer) // cut while it ran
		}
	}
}

// released notes client's release invocation: it ends the hold (its last
// level, on a reentrant lock).
func (in *Incremental) released(client int) {
	if h := in.held[client]; h != nil {
		if h.depth--; h.depth <= 0 || !in.h.Info.Reentrant {
			delete(in.held, client)
		}
	}
}

// sessionEnd adds, for a lock that dies with its client's session, the
// indeterminate releases by which the server frees what client held when
// its session ended at t (why: its process ended, or a server fault ended
// every session), as withSessionEnds does for Check.
func (in *Incremental) sessionEnd(client int, t int64, why string) {
	h := in.held[client]
	if h == nil || !in.h.Info.Session {
		return
	}
	delete(in.held, client)
	for range h.depth {
		in.queue = append(in.queue, len(in.h.Ops))
		op := sessionEndOp(client, -int64(len(in.h.Ops))-1, h.owner, t, t, why)
		op.Index = len(in.h.Ops)
		in.h.Ops = append(in.h.Ops, op)
	}
}

// advance lets the sweep read every event it safely can.
func (in *Incremental) advance() []Anomaly {
	for in.verdict == Pass {
		s := in.s
		for len(in.queue) > 0 && !s.stopped() {
			i := in.queue[0]
			if _, running := in.open[in.h.Ops[i].OpID]; running {
				break
			}
			in.queue = in.queue[1:]
			if op, ok := lockOpOf(&in.h.Ops[i], in.ow); ok {
				s.add(op)
			}
		}
		if !s.stopped() {
			s.advance(in.safe())
		}
		if !s.stopped() {
			return nil
		}
		if found := in.decide(); found != nil || in.s == s {
			return found
		}
		// decide switched to an exact sweep: go on with it.
	}
	return nil
}

// safe is the time before which the sweep can read every return: the
// invocation of the oldest operation still running, else the latest event
// (more invocations may still come at its time), or the end.
func (in *Incremental) safe() int64 {
	switch {
	case in.ended:
		return history.Never
	case len(in.queue) > 0:
		return in.h.Ops[in.queue[0]].Call
	}
	return in.last
}

// decide confirms the sweep's stop: an exact sweep over the operations
// read so far.
func (in *Incremental) decide() []Anomaly {
	s := in.s
	if s.stats.Exceeded {
		in.verdict = Unknown
		in.detail = fmt.Sprintf("the lock sweep exceeded its bound (%d configurations) at %s", s.stats.Bound, at(s.stats.ExceededAt))
		return nil
	}
	exact := newSweep(in.m, in.opts.SearchBound)
	exact.win = newWindowTracker(in.m)
	for k := range s.ops {
		exact.add(s.ops[k])
	}
	exact.advance(in.safe())
	switch {
	case exact.stats.Exceeded:
		in.verdict = Unknown
		in.detail = fmt.Sprintf("the exact lock sweep exceeded its bound (%d configurations) at %s", exact.stats.Bound, at(exact.stats.ExceededAt))
		return nil
	case !exact.failed:
		// The restricted sweep was wrong to stop; the exact one has read
		// as much: go on with it.
		in.s = exact
		return nil
	}
	in.verdict = Fail
	a := sweepRun{s: exact, ow: in.ow}.anomaly(in.h.Ops, in.h, witnessBudget)
	in.found = []Anomaly{a}
	return in.found
}

// Result returns the linearizable property as far as the events fed so far
// decide it: Fail with the anomaly once one was reported; Unknown when the
// sweep exceeded its bound; Pass otherwise (at the end of the run, or so
// far when it has not ended, as the Detail says).
func (in *Incremental) Result() (Property, []Anomaly) {
	st := in.s.stats
	p := Property{Name: "linearizable", Engine: EngineLock + " (incremental)", Status: in.verdict, Search: &st}
	switch in.verdict {
	case Fail:
		p.Count = 1
		p.Detail = "the first operation that cannot be placed"
	case Unknown:
		p.Detail = in.detail
	default:
		p.Detail = in.s.statsDetail()
		if !in.ended {
			p.Detail += "; so far (the run goes on)"
		}
	}
	return p, in.found
}

// OnlineHolds follows, event by event, the holds as Holds defines them
// (from an acquire's ok to the client's next release invocation, its crash
// or its exit; a reentrant lock's hold ends at the release that brings its
// depth back to zero) and reports a double holder as soon as a client is
// granted the lock while another surely holds it: the online checker runs
// it beside an Incremental. A run whose clients check their own validity
// (RunInfo.ChecksValidity: their holds may end before a release) gets no
// online report; Check decides it.
//
// An OnlineHolds is not safe for concurrent use.
type OnlineHolds struct {
	info history.RunInfo
	open map[int]*onlineHold // client -> its hold
}

// onlineHold is a hold still open.
type onlineHold struct {
	depth  int
	shared bool
}

// NewOnlineHolds returns a tracker for a run with the given header.
func NewOnlineHolds(info history.RunInfo) *OnlineHolds {
	return &OnlineHolds{info: info, open: map[int]*onlineHold{}}
}

// Add feeds the next event (in the order recorded) and returns the double
// holder it made certain, nil if none: the holder with the lowest client
// number first, the new holder second. Two shared (read) holds are no
// double holder.
func (o *OnlineHolds) Add(e history.Event) *Anomaly {
	if o.info.ChecksValidity {
		return nil
	}
	switch {
	case e.Type == history.Invoke && e.Op == history.Release:
		if h := o.open[e.Client]; h != nil {
			if h.depth--; h.depth <= 0 || !o.info.Reentrant {
				delete(o.open, e.Client)
			}
		}
	case e.Type == history.ClientExit, e.Type == history.FaultStart && e.Fault == "crash-client":
		delete(o.open, e.Client)
	case e.Type == history.OK && e.Op == history.Acquire:
		if h := o.open[e.Client]; h != nil {
			h.depth++
			return nil
		}
		b := &onlineHold{depth: 1, shared: e.Mode == history.ModeRead}
		other := -1
		for c, a := range o.open {
			if !(a.shared && b.shared) && (other < 0 || c < other) {
				other = c
			}
		}
		o.open[e.Client] = b
		if other >= 0 {
			return &Anomaly{Kind: KindDoubleHolder, Severity: SeverityViolation, Clients: []int{other, e.Client}, Start: e.Time, End: e.Time,
				Explanation: fmt.Sprintf("client %d was granted the lock while client %d held it", e.Client, other)}
		}
	}
	return nil
}
