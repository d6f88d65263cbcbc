package checker

import (
	"slices"

	"github.com/locktest/locktest/history"
)

// The lock sweep's expansion: placing a returning operation in a
// configuration after every sequence of moves that allows it.

// expand places x in c after every sequence of moves (running operations
// placed early, indeterminate ones used) that allows it, adding the results
// to s.next.
//
// A running operation that changes nothing where it stands (a release
// refused as not-owner by a client that does not hold the lock) is not
// tried as a move: placing it as late as possible is never worse (it only
// moves the clock). It is placed early only just before a step that would
// change what it does (see emit), or at its own return.
func (s *sweep) expand(c *config, x int32) {
	s.work = append(s.work[:0], *c)
	s.seen = append(s.seen[:0], *c)
	for len(s.work) > 0 {
		// The node explored lives in s.node, not on the heap.
		s.node = s.work[len(s.work)-1]
		s.work = s.work[:len(s.work)-1]
		d := &s.node
		s.stats.Explored++
		if s.halted() {
			return
		}
		s.deferred, s.deferDone = s.deferred[:0], s.deferDone[:0]
		// (Read-write: only a refused release can change nothing; see
		// noop.)
		deferrable := s.inflight
		if s.m.rw {
			deferrable = s.runningReleases
		}
		for _, y := range deferrable {
			if y != x && (!s.m.rw || s.ops[y].out == outNotOwner) && d.hasLin(y) < 0 && s.noop(d.s, y) {
				s.deferred = append(s.deferred, y)
				s.deferDone = append(s.deferDone, false)
			}
		}
		s.cur, s.x = d, x
		few := false
		if s.m.rw {
			s.openReleases(d)
			s.writerFits = s.writerMayGo(d)
			s.writerAny, s.writerX = 0, 0
			few = s.fewMoves(d)
		}
		s.apply(d, x, -1, true)
		if few {
			s.fewRunningMoves(d, x)
		} else {
			for _, y := range s.inflight {
				if y != x && d.hasLin(y) < 0 && !slices.Contains(s.deferred, y) {
					s.apply(d, y, -1, false)
				}
			}
		}
		s.poolMoves(d, x)
		if len(s.seen) > s.bound/4+64 {
			s.exceed()
			return
		}
	}
}

// heldCommutes reports, for a configuration c whose lock is held and a
// failed acquire x returning now (which placed in c only moves the clock to
// its invocation at most; or a refused release that changes nothing else
// either, see refusedCommutes), whether every sequence of moves that could go
// before x can go after it, to the same state: then placing x at once is
// the only placement worth keeping (just in time, the moves come when a
// later return needs them).
//
// A move placed at a later point has the same effect: taking the lock
// (possibly over an expired lease) or nesting or releasing it only depends
// on the point through the point itself, which stays within the running
// operation's interval (it returns at or after now). The one exception is a
// successful release's deadline: the holder's lease may surely expire
// between c's clock and x's invocation. Every other holder a move can
// install has a deadline after now (a running acquire returns at or after
// now; a lost one has none).
func (s *sweep) heldCommutes(c *config) bool {
	if !s.m.lease || (c.s.readers == 0 && s.m.deadline(c.s) >= s.t) {
		return true
	}
	for _, y := range s.inflight {
		if op := &s.ops[y]; op.kind == linRelease && op.out == outOK && s.m.deadlineOwned(c.s, op) < s.t && c.hasLin(y) < 0 {
			return false
		}
	}
	return true
}

// refusedCommutes reports, for a release x refused as not-owner and
// returning now, whether placing it in c at once is worth keeping as the
// only placement where it changes nothing: x changes nothing in c but the
// clock (s.buf holds its one state), and every sequence of moves that could
// go before x can go after it (heldCommutes, which needs no held lock: a
// free lock has no deadline). Then, of the placements after moves, only
// those where x changes the state (its client holds the lock, now or after
// the moves) can do what c with x placed cannot: where x changes nothing,
// the same moves can follow x instead, at points no earlier than x's,
// which is no later than now, and the next return explores them again.
// (Not on read-write locks, whose expansion asks only the moves that may
// not wait: rwDeferrable.)
func (s *sweep) refusedCommutes(c *config, x *lockOp) bool {
	if s.m.rw || x.out != outNotOwner || len(s.buf) != 1 {
		return false
	}
	ns := s.buf[0]
	ns.now = c.s.now
	return ns == c.s && s.heldCommutes(c)
}

// noop reports whether y, placed in state st, changes nothing but the clock.
func (s *sweep) noop(st lockState, y int32) bool {
	op := &s.ops[y]
	if s.m.rw && op.out != outUnknown {
		// Without building the states: a successful acquire or release
		// changes the lock (or cannot be placed), a refused release
		// changes nothing unless its client holds a part of it.
		switch {
		case op.out == outOK:
			return false
		case op.kind == linRelease && op.out == outNotOwner:
			return !s.m.ownsAny(st, op)
		}
	}
	s.bufNoop = s.m.stepInto(s.bufNoop[:0], st, op, op.out)
	if len(s.bufNoop) != 1 {
		return false
	}
	ns := s.bufNoop[0]
	ns.now = st.now
	return ns == st
}

// placeDeferred, when a step takes the lock from d.s to ns, explores d with
// each deferred operation placed first whose doing in ns would differ.
func (s *sweep) placeDeferred(d *config, ns lockState) {
	if len(s.deferred) == 0 || (ns.client == d.s.client && ns.owner == d.s.owner && ns.depth == d.s.depth && ns.readers == d.s.readers) {
		return
	}
	for k, y := range s.deferred {
		if s.deferDone[k] || s.noop(ns, y) {
			continue
		}
		s.deferDone[k] = true // once per node
		op := &s.ops[y]
		s.buf = s.m.stepInto(s.buf[:0], d.s, op, op.out)
		if len(s.buf) != 1 || (s.m.lease && s.buf[0].now > s.t) {
			continue
		}
		nd := *d
		nd.s = s.buf[0]
		if s.m.lease && nd.s.held() {
			nd.failedUpTo = nd.s.now
		}
		nd.lin = withLin(d.lin, y)
		// Not s.push: d itself dominates nd (it can place y at no cost),
		// but it is deferring y, so nd must be explored.
		s.seen = append(s.seen, nd)
		s.work = append(s.work, nd)
	}
}

// dominated reports whether a configuration seen dominates nd.
func (s *sweep) dominated(nd *config) bool {
	for k := range s.seen {
		if s.dominates(&s.seen[k], nd) {
			return true
		}
	}
	return false
}

// apply places y in d, in every way the model allows. Terminal: y is the
// returning operation, and the results go to s.next; otherwise y is a move
// (from pool, or a running operation when pool < 0) and the results are
// explored further unless dominated.
func (s *sweep) apply(d *config, y int32, pool int32, terminal bool) {
	op := &s.ops[y]
	if !terminal && s.m.rw && s.rwDeferrable(d, op) {
		return
	}
	if terminal && s.changesOnly && s.noop(d.s, y) {
		return // (placed in the root already: see refusedCommutes)
	}
	s.buf2 = s.m.stepInto(s.buf2[:0], d.s, op, op.out)
	states := s.buf2
	if len(states) == 0 {
		return
	}
	// emit reuses the step buffers (noop, placeDeferred): copy.
	var local [4]lockState
	states = append(local[:0], states...)
	for _, ns := range states {
		if s.m.lease && ns.now > s.t {
			continue // y would come after the returning operation
		}
		if pool >= 0 && s.horizon > 0 && satAdd(op.done, s.horizon) < max(ns.now, s.t) {
			s.stats.Restricted++
			continue // expired (restricted model)
		}
		if pool >= 0 && op.kind == linAcquire && ns.depth > d.s.depth && d.s.client != 0 && !s.nest {
			continue // a nested lost acquire, not needed yet (poolMoves)
		}
		s.emit(d, y, pool, terminal, ns, ns.now)
		if s.m.lease && d.s.held() && !ns.held() && len(s.heldIn) > 0 {
			s.movedFrees(d, y, pool, terminal, ns.now)
		}
	}
}

// movedFrees adds, for a step y that frees the lock at p, the alternatives
// in which y comes later, at the invocation v of a running failed acquire
// (v > p), so that those invoked by v are placed before it while the lock
// is still held.
func (s *sweep) movedFrees(d *config, y int32, pool int32, terminal bool, p int64) {
	s.calls = s.calls[:0]
	for _, j := range s.heldIn {
		if v := s.ops[j].call; v > p && v > d.failedUpTo {
			s.calls = append(s.calls, v)
		}
	}
	if len(s.calls) == 0 {
		return
	}
	slices.Sort(s.calls)
	s.calls = slices.Compact(s.calls)
	op := &s.ops[y]
	for _, v := range s.calls {
		if v > s.t {
			break
		}
		ds := d.s
		ds.now = v
		for _, ns := range s.m.stepInto(nil, ds, op, op.out) {
			if !ns.held() && ns.now <= s.t {
				s.emit(d, y, pool, terminal, ns, v)
			}
		}
	}
}

// emit builds the configuration after y took d to state ns; placed is the
// horizon of failed acquires placed before a free step.
func (s *sweep) emit(d *config, y int32, pool int32, terminal bool, ns lockState, placed int64) {
	nd := config{s: ns, failedUpTo: d.failedUpTo, lin: d.lin, used: d.used, grant: d.grant, freed: d.freed}
	wasHeld, isHeld := d.s.held(), ns.held()
	switch {
	case isHeld && s.m.lease:
		nd.failedUpTo = ns.now
	case isHeld:
		nd.failedUpTo = history.Never
	case wasHeld && s.m.lease:
		nd.failedUpTo = placed
	case wasHeld:
		nd.failedUpTo = s.t
	}
	op := &s.ops[y]
	if isHeld && op.kind == linAcquire && ns != d.s && (ns.depth == 1 || (ns.readers != d.s.readers && ns.client == 0)) {
		nd.grant = y
		nd.lost = pool >= 0 && !terminal
		if ns.owner == ownerFresh && s.phantom(ns) {
			nd.s.client = anonymous
			if pool >= 0 && s.capacity > 0 {
				// Approximate: any client's lost acquire gives the same
				// anonymous lock; try one that has plenty left.
				if s.anonDone {
					s.stats.Approx++
					return
				}
				if int32(len(s.pools[pool].ops))-d.usedOf(pool) > s.capacity {
					s.anonDone = true
				}
			}
		}
	}
	if wasHeld && !isHeld {
		nd.freed, nd.grant = y, -1
	}
	if s.cur == d {
		s.placeDeferred(d, ns)
	}
	if terminal {
		s.next = append(s.next, nd)
		return
	}
	// Built in scratch, copied only if no configuration seen dominates
	// it (most moves are dominated: allocating each was a large share of
	// a long pass).
	if pool >= 0 {
		s.useBuf = withUseAtInto(s.useBuf[:0], d.used, pool, s.avail(d, pool)+1)
		nd.used = s.compact(s.useBuf)
	} else {
		s.linBuf = withLinInto(s.linBuf[:0], d.lin, y)
		nd.lin = s.linBuf
	}
	if s.dominated(&nd) {
		return
	}
	if pool >= 0 {
		nd.used = slices.Clone(nd.used)
	} else {
		nd.lin = slices.Clone(nd.lin)
	}
	s.seen = append(s.seen, nd)
	s.work = append(s.work, nd)
}
