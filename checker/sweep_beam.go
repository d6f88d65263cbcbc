package checker

import "slices"

// The first pass's beam (issue 17's histgen OpTimeout shape): when more
// than beam configurations stay open after a return, the first pass keeps
// the beam most promising ones and drops the rest.
//
// Why it is sound. Dropping a configuration only removes ways to order the
// history; every configuration the sweep keeps was built step by step by
// the model from the empty lock (dominance and pruning only delete). So
// when a pass that cut reaches the end with a configuration open, that
// configuration is a linearization of the history (of the restricted
// model, a subset of the full one): linearizable, exactly. When a pass
// that cut stops at an operation it cannot place, that proves nothing (the
// dropped configurations might have placed it): SearchStats.Beam says so,
// and runLockSweepHalt hands the history to the exact pass, as for the
// other approximations of the first pass (Approx, Restricted).
//
// Which ones are kept changes only how often the pass gets through, never a
// verdict: those that used the fewest lost operations (those left can
// still explain refusals to come), then the earliest clock and the latest
// failed-acquire horizon (the dominance order), then the order they were
// built in.

// passBeams are the beams of the first pass, tried in turn while a pass
// that cut stops (a narrow beam is fast, and decides most histories of the
// shape; a wider one gets through where it did not): first resumed from a
// checkpoint before the stop (sweep_resume.go), then from the start; then
// the exact pass decides.
var passBeams = []int{4, 8, 16, 64}

// cutBeam keeps the s.beam most promising configurations of s.next.
func (s *sweep) cutBeam() {
	if s.beam <= 0 || len(s.next) <= s.beam {
		return
	}
	s.beamOrder()
	s.noteUncut()
	s.keepFirst(s.beam)
}

// preCut, before prune, keeps the preCutTimes * beam most promising
// configurations of s.next when a beam pass has more open: pruning compares
// each pair of configurations with the same holder, and on long histories
// of issue 17's shape hundreds of them made it most of the pass's time,
// though the beam keeps only a few. Like the beam, it only drops
// configurations.
func (s *sweep) preCut() {
	if w := preCutTimes * s.beam; s.beam > 0 && len(s.next) > w {
		s.beamOrder()
		s.keepFirst(w)
	}
}

// preCutTimes: measured on histgen's OpTimeout shape, 100k operations, 50
// clients, 5% lost, 20 seeds: CPU median 1.25 s against 2.13 s without a
// pre-cut (slowest 1.36 s against 2.55 s); 1M operations, 5% lost: the first
// pass 16 s CPU against 30 s (16 times: 20 s, 32 times: 25 s). A checkpoint
// of a pass with a beam of 4 then keeps at most 32 configurations.
const preCutTimes = 8

// beamMoves: where any lost acquire may take the lock, a beam pass tries
// the newest pools until beamMoves * beam of them gave a configuration of
// their own (anyLostAcquire).
var beamMoves = 1

// beamOrder sorts s.order, the indexes of s.next, most promising first.
func (s *sweep) beamOrder() {
	s.order = s.order[:0]
	for i := range s.next {
		s.order = append(s.order, int32(i))
	}
	slices.SortStableFunc(s.order, func(i, j int32) int {
		a, b := &s.next[i], &s.next[j]
		if ua, ub := usedTotal(a.used), usedTotal(b.used); ua != ub {
			return cmpInt64(int64(ua), int64(ub))
		}
		if ia, ib := usedLate(a.used), usedLate(b.used); ia != ib {
			return cmpInt64(ib, ia)
		}
		if a.s.now != b.s.now {
			return cmpInt64(a.s.now, b.s.now)
		}
		return cmpInt64(b.failedUpTo, a.failedUpTo)
	})
}

// keepFirst keeps the configurations of s.next that s.order names first,
// k of them, in the order they were built, and counts the others as cut.
func (s *sweep) keepFirst(k int) {
	s.keep = append(s.keep[:0], make([]bool, len(s.next))...)
	for _, i := range s.order[:k] {
		s.keep[i] = true
	}
	s.stats.Beam += int64(len(s.next) - k)
	out := s.next[:0]
	for i := range s.next {
		if s.keep[i] {
			out = append(out, s.next[i])
		}
	}
	s.next = out
}

// usedLate is how late the lost operations a configuration used were
// invoked (pools are numbered as their first operation is): of two that
// used as many, the one that used later ones keeps the older ones, whose
// clean-up releases come first, so that they become spent (free to hold
// the lock for good) sooner.
func usedLate(used []poolUse) int64 {
	n := int64(0)
	for _, u := range used {
		n += int64(u.pool) * int64(u.n)
	}
	return n
}
