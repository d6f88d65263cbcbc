package checker

import (
	"maps"
	"slices"

	"github.com/locktest/locktest/history"
)

// Resuming the first pass (issue 17): when a pass with a beam stops at an
// operation it cannot place, a wider beam is tried from a checkpoint taken
// shortly before, not from the start of the history.
//
// A checkpoint is the sweep's whole state after a return at which the
// beam cut (the running operations, the pools, the statistics, where the
// pass is in the history), with the configurations open *before* the cut
// (the resumeWidth best ones, in the order the sweep built them). Every one
// of those was built by the model's steps from the empty lock, so a pass
// resumed from any of them is again a pass that only dropped
// configurations: reaching the end is a linearization, stopping proves
// nothing (sweep_beam.go). Nothing else in the state depends on which
// configurations are open: the running operations, the pools and their
// caches (a pool's live and phantom follow the sweep's time, and are asked
// again as it goes on) are those of the history at that return.
//
// Read-write locks keep the old way (a wider pass from the start): their
// reader sets are interned in a table that the sweep compacts to the sets
// its open configurations use, which a checkpoint would have to copy.

// Resuming: a checkpoint every resumeEvery returns read (at the first
// return after that at which the beam cuts), the last resumeKeep of them
// kept, resumeWidth configurations in each. (Variables: tests take
// checkpoints more often.)
var (
	resumeEvery = 256
	resumeKeep  = 4
)

// resumeShare spaces checkpoints on long histories: a checkpoint copies the
// pools and their indexes (ckSize elements, growing with the history: the
// index by owner holds one per owner), so one is taken every ckSize /
// resumeShare returns when that is more than resumeEvery, and the copies
// cost a bounded share of the pass whatever the history's length (on 100k
// operations, 5% lost: 17,600 elements, 92 us a copy on a loaded box, 284
// checkpoints).
const resumeShare = 64

const resumeWidth = 64

// sweepBeam is what a first pass keeps to resume from.
type sweepBeam struct {
	// ckEvery, when not 0, takes checkpoints (every ckEvery returns) and
	// keeps the last ckKeep; ckShare, when not 0, spaces them by at least
	// ckSize / ckShare returns (ckSize: the elements the last one copied).
	ckEvery, ckKeep int
	ckShare, ckSize int
	// nextCall is the next operation runFrom invokes.
	nextCall int
	// pending: the configurations before the cut of the return being
	// read (deep copies), to be kept by a checkpoint at its end; cutFull:
	// how many there were, cutTo: the beam then.
	pending        []config
	cutFull, cutTo int
	lastCk         int           // returns read at the last checkpoint
	cks            []*checkpoint // the last resumeKeep checkpoints, oldest first
	// baseBeam is the pass's own beam; a resumed pass keeps a wider one
	// (beam) until it has read wideUntil returns.
	baseBeam, wideUntil int
	// resumed counts the resumes of the pass from the start.
	resumed int
}

// checkpoint is a sweep's state after a return at which its beam cut.
type checkpoint struct {
	at    int    // returns read (Forced + Searched)
	s     *sweep // the state, without configurations
	uncut []config
	full  int // configurations before the cut (uncut holds the best resumeWidth)
	cutTo int // the beam then
}

// returnsRead is how many returns the sweep has read.
func (s *sweep) returnsRead() int { return s.stats.Forced + s.stats.Searched }

// noteUncut (cutBeam, before it cuts s.next) keeps the best resumeWidth of
// the configurations, in s.order's order of preference, for a checkpoint
// at the end of the return, when one is due.
func (s *sweep) noteUncut() {
	every := s.ckEvery
	if s.ckShare > 0 {
		every = max(every, s.ckSize/s.ckShare)
	}
	if s.ckEvery == 0 || s.returnsRead()+1-s.lastCk < every {
		return
	}
	w := min(resumeWidth, len(s.order))
	best := slices.Clone(s.order[:w])
	slices.Sort(best) // (the order they were built in)
	s.pending = s.pending[:0]
	for _, i := range best {
		s.pending = append(s.pending, cloneConfig(&s.next[i]))
	}
	s.cutFull, s.cutTo = len(s.next), s.beam
}

// checkpointed ends a return (ret, once the frontier is set): it takes the
// checkpoint noteUncut prepared, and narrows a resumed pass's beam back to
// its own once past where the pass stopped.
func (s *sweep) checkpointed() {
	if s.ckEvery == 0 {
		return
	}
	at := s.returnsRead()
	if s.beam != s.baseBeam && at >= s.wideUntil {
		s.beam = s.baseBeam
	}
	if len(s.pending) == 0 {
		return
	}
	s.lastCk = at
	cp := &checkpoint{at: at, s: s.snapshot(), uncut: slices.Clone(s.pending), full: s.cutFull, cutTo: s.cutTo}
	s.pending = s.pending[:0]
	s.ckSize = len(s.pools) + len(s.relByOwner) + len(s.relNone) + len(s.relOrphans) + len(s.lostAcqAll) +
		len(s.lostAcqPools) + len(s.lostRelPools) + len(s.lostRelIndex) + len(s.rets.h)
	if len(s.cks) == s.ckKeep {
		s.cks = append(s.cks[:0], s.cks[1:]...)
	}
	s.cks = append(s.cks, cp)
}

// cloneConfig copies c and the slices it owns (the sweep compacts a
// configuration's pool uses in place).
func cloneConfig(c *config) config {
	d := *c
	d.lin = slices.Clone(c.lin)
	d.used = slices.Clone(c.used)
	return d
}

// snapshot is a deep copy of s's state but its configurations, scratch and
// checkpoints: a sweep that reads on from where s is, independently of it.
// What is shared is read only: the operations, the model, the lookahead.
// The operations of a pool are only ever appended to: a copy shares them
// up to its length, clipped so that it appends to its own.
func (s *sweep) snapshot() *sweep {
	n := &sweep{
		m: s.m, ops: s.ops, bound: s.bound, t: s.t, win: s.win,
		sweepPass: s.sweepPass,
		sweepResult: sweepResult{
			stats: s.stats, rules: s.rules, wide: s.wide, blocker: -1,
		},
	}
	n.compactAt, n.minCompact = s.compactAt, s.minCompact

	r := &s.sweepRunning
	n.rets = retHeap{ops: &n.ops, h: slices.Clone(r.rets.h)}
	n.inflight = slices.Clone(r.inflight)
	n.runningReleases, n.runningWriters = slices.Clone(r.runningReleases), slices.Clone(r.runningWriters)
	n.runningOf, n.runningReadsOf = slices.Clone(r.runningOf), slices.Clone(r.runningReadsOf)
	n.heldIn = slices.Clone(r.heldIn)

	p := &s.sweepPools
	n.pools = slices.Clone(p.pools)
	for k := range n.pools {
		n.pools[k].ops = slices.Clip(n.pools[k].ops)
	}
	n.lostAcqPools, n.lostRelPools = clipMap(p.lostAcqPools), clipMap(p.lostRelPools)
	n.relByOwner, n.relNone, n.relOrphans = slices.Clone(p.relByOwner), slices.Clone(p.relNone), slices.Clone(p.relOrphans)
	n.lostRelIndex = maps.Clone(p.lostRelIndex)
	n.lostAcqAll = slices.Clone(p.lostAcqAll)
	n.lostReadPools, n.lostWritePools = slices.Clone(p.lostReadPools), slices.Clone(p.lostWritePools)
	n.lostReadPoolsOf = slices.Clone(p.lostReadPoolsOf)
	for k := range n.lostReadPoolsOf {
		n.lostReadPoolsOf[k] = slices.Clip(n.lostReadPoolsOf[k])
	}
	n.lostReadOwned = slices.Clone(p.lostReadOwned)

	b := &s.sweepBeam
	n.sweepBeam = sweepBeam{ckEvery: b.ckEvery, ckKeep: b.ckKeep, ckShare: b.ckShare, ckSize: b.ckSize, nextCall: b.nextCall, lastCk: b.lastCk,
		baseBeam: b.baseBeam, wideUntil: b.wideUntil, resumed: b.resumed}
	return n
}

func clipMap(m map[int32][]int32) map[int32][]int32 {
	out := make(map[int32][]int32, len(m))
	for k, v := range m {
		out[k] = slices.Clip(v)
	}
	return out
}

// resumeFrom returns a sweep that reads on from checkpoint cp with a beam
// of beam (and the checkpoints up to cp): cp's configurations cut to beam
// become its frontier, as if that beam had cut there.
func (cp *checkpoint) resumeFrom(cks []*checkpoint, beam int) *sweep {
	n := cp.s.snapshot()
	n.cks = slices.Clone(cks)
	n.beam = beam
	// The cut of that return again, with the new beam (noteUncut does not
	// take a checkpoint there again: lastCk is cp.at).
	n.stats.Beam -= int64(cp.full - cp.cutTo)
	n.stats.Beam += int64(cp.full - len(cp.uncut))
	n.next = make([]config, 0, len(cp.uncut))
	for k := range cp.uncut {
		n.next = append(n.next, cloneConfig(&cp.uncut[k]))
	}
	n.cutBeam()
	n.frontier, n.next = n.next, nil
	k := len(n.frontier)
	n.stats.MaxFrontier = max(n.stats.MaxFrontier, k)
	if k > 1 && !n.wide {
		n.stats.Windows++
	}
	n.wide = k > 1
	return n
}

// runFrom reads ops, in order of invocation, from s.nextCall to the end
// (or the first operation that cannot be placed, or the bound): runAll,
// but where a resumed sweep is.
func (s *sweep) runFrom(ops []lockOp) bool {
	s.ops = ops
	for i := s.nextCall; i < len(ops); i++ {
		s.nextCall = i
		s.advance(ops[i].call)
		if s.stopped() {
			return false
		}
		s.call(int32(i))
		if ops[i].ret != history.Never {
			s.rets.push(int32(i))
		}
	}
	s.nextCall = len(ops)
	return s.finish()
}

// firstPass runs the first pass (see runLockSweep) with each beam of
// passBeams from the start of the history, each resumed wider from its
// checkpoints where it stops (resuming), and where a pass stops for good,
// the window proof (windowproof.go) tried at its blocker; nil when the exact
// pass must decide: every beam stopped, and no window failed the history.
func firstPass(ops []lockOp, m lockModel, opts Options, la *lookahead, halt func() bool, wp *windowProver) (*sweep, *windowFailure) {
	for _, beam := range passBeams {
		s := newSweep(m, opts.SearchBound)
		s.halt = halt
		s.mergeOrphans, s.look = true, la
		s.capacity, s.horizon = passCapacity, int64(opts.LostHorizon)
		s.beam, s.baseBeam = beam, beam
		if !m.rw {
			s.ckEvery, s.ckKeep, s.ckShare = resumeEvery, resumeKeep, resumeShare
		}
		s, wf := s.resumingProved(ops, wp)
		if wf != nil {
			return s, wf
		}
		if !s.stopped() || s.stats.Exceeded ||
			(s.stats.Approx == 0 && s.stats.Restricted == 0 && s.stats.Beam == 0) {
			return s, nil
		}
		// Stopped where no resume got past: a relaxed window ending
		// there that cannot be ordered fails the history (windowproof.go).
		if wf := wp.try(s.blocker); wf != nil {
			return s, wf
		}
		if s.stats.Beam == 0 {
			break // (a wider beam would stop there too: the exact pass decides)
		}
	}
	return nil, nil
}

// resuming runs s to the end; where it stops after its beam cut, it
// resumes from the latest checkpoint before the stop with the next wider
// beam, then (stopping again before getting past) from an earlier one with
// a wider one still, and so on while checkpoints and beams last. Every
// stop gets its own resumes: a resume either gets past the stop (the next
// stop is later in the history) or widens the beam, so their number is
// bounded by the returns times the beams (and the sweep's time budget
// halts it). A resumed pass keeps its wider beam until resumeEvery returns past
// the stop, then narrows back to its own. It returns the last sweep run:
// through, exceeded, or stopped.
func (s *sweep) resuming(ops []lockOp) *sweep {
	s, _ = s.resumingProved(ops, nil)
	return s
}

// resumingProved is resuming, but before the widest beam resumes (the
// costliest, and the last, at a stop the narrower ones did not get past)
// it tries the window proof at that stop (wp, when not nil): a relaxed
// window that cannot be ordered fails the history whichever pass stopped
// there (windowproof.go), and is returned with the sweep that stopped.
// (firstPass tries it there after the resumes otherwise; a window proof is
// tried once per blocker.)
func (s *sweep) resumingProved(ops []lockOp, wp *windowProver) (*sweep, *windowFailure) {
	var cks []*checkpoint // the checkpoints before the stop being got past
	stuck, from, level := -1, 0, 0
	for tries := 0; ; tries++ {
		if s.runFrom(ops) || s.stats.Exceeded || s.stats.Beam == 0 || s.ckEvery == 0 {
			return s, nil
		}
		if at := s.returnsRead(); at > stuck {
			stuck, cks, from = at, s.cks, at
			level = slices.Index(passBeams, s.baseBeam)
		}
		j := len(cks) - 1
		for j >= 0 && cks[j].at >= from {
			j--
		}
		if j < 0 || level+1 >= len(passBeams) {
			return s, nil
		}
		if wp != nil && level+2 == len(passBeams) && level > slices.Index(passBeams, s.baseBeam) {
			if wf := wp.try(s.blocker); wf != nil {
				return s, wf
			}
		}
		level++
		from = cks[j].at
		s = cks[j].resumeFrom(cks[:j+1], passBeams[level])
		s.wideUntil = stuck + resumeEvery
		s.resumed = tries + 1
	}
}
