package checker

import (
	"slices"
	"sort"

	"github.com/locktest/locktest/history"
)

// Dominance between the lock sweep's configurations (see lockcheck.go):
// which configuration can do all another can, so that only one of them
// stays open, and what the rest of the history (lookahead) says about it.

// usedLE reports whether configuration a has, pool by pool, at least the
// operations left that b has: it used no more of them, counting expired
// ones as used (horizon), or (capacity, approximate) it has at least
// capacity left. Spent lost acquires (sweep_spent.go) count by number: a
// must have each other operation b has left, and at least as many spent
// ones in all, from whichever pools (usedLESpent; only asked when a used
// more of some pool, since otherwise it has at least b's spent ones too).
func (s *sweep) usedLE(a, b *config) bool {
	j := 0
	for _, u := range a.used {
		p := &s.pools[u.pool]
		ua := max(u.n, p.live)
		for j < len(b.used) && b.used[j].pool < u.pool {
			j++
		}
		ub := p.live
		if j < len(b.used) && b.used[j].pool == u.pool {
			ub = max(b.used[j].n, p.live)
		}
		if ua <= ub {
			continue
		}
		if s.capacity > 0 && int32(len(p.ops))-ua >= s.capacity {
			s.stats.Approx++
			continue
		}
		if t, ok := s.spentClock(a, b); ok {
			return s.usedLESpent(a, b, t)
		}
		return false
	}
	return true
}

// dominates reports whether configuration a can do all that b can (or,
// with s.capacity, all but using more than capacity of a pool b has left).
func (s *sweep) dominates(a, b *config) bool {
	m := s.m
	if m.lease && !s.reach && a.s.now > b.s.now {
		// (Every rule below needs a's clock no later than b's: asked
		// first, it is the cheapest.)
		return false
	}
	if s.expiredOverFree(a, b) {
		s.rules.expiredOverFree++
		return true
	}
	if a.s.client != b.s.client || a.s.owner != b.s.owner || a.s.depth != b.s.depth || a.s.readers != b.s.readers ||
		(!slices.Equal(a.lin, b.lin) && !s.linCovers(a, b)) || (s.reach && !s.usedLE(a, b)) {
		return s.reach && s.reaches(a, b)
	}
	// The lease and horizon first, the pools (usedLE, the costliest)
	// last.
	held := a.s.held()
	if m.lease && a.s.now > b.s.now {
		return false
	}
	if m.lease && held {
		// An earlier possible expiry and a later possible refresh only
		// allow more; the refresh only matters to a successful release
		// of that holder still to come. A lease that may have run out by
		// a's clock has, from then on, the earliest possible expiry
		// whenever it was granted.
		if !(a.s.acqCall <= b.s.acqCall || (a.s.readers == 0 && m.expiry(a.s) <= a.s.now)) ||
			!(a.s.acqRet >= b.s.acqRet || !s.deadlineMatters(b.s)) {
			return false
		}
	} else if !held && a.failedUpTo < b.failedUpTo {
		return false
	}
	if !s.usedLE(a, b) {
		// Approximate (first pass): when a lost acquire of any client
		// holds the lock and none can be freed (anonymous), which pool
		// paid for it matters little: compare how many were used.
		if s.capacity == 0 || a.s.client != anonymous || usedTotal(a.used) > usedTotal(b.used) {
			return false
		}
		s.stats.Approx++
	}
	return true
}

// lookahead is what the sweep knows of the rest of the history when it
// has all of it (not incremental): each client's successful releases, and
// which clients ever lose a release that names no known owner.
type lookahead struct {
	rels     map[int32]relList // client -> its successful releases (indices), by invocation
	refused  map[int32][]int32 // client -> its releases that failed "not-owner" naming an owner no acquire carries
	orphanIR map[int32]bool    // client -> it has a lost release naming no known owner
	// The same successful releases indexed by the owner they name, so that
	// a holder's matching release is found without scanning its client's
	// every release (a lost acquire's holder matches only a few, and
	// scanning them all made long histories quadratic): fresh, by client,
	// those naming no owner or one no acquire carries (they can free a key
	// of ownerFresh); none, by client, those naming no owner; byOwner, by
	// owner id, those naming it.
	fresh, none map[int32]relList
	byOwner     map[int32]relList
}

// relList is a list of release indices by invocation; sorted says they
// also come by return.
type relList struct {
	idx    []int32
	sorted bool
}

func (l relList) add(ops []lockOp, k int32) relList {
	if len(l.idx) == 0 {
		l.sorted = true
	} else if ops[l.idx[len(l.idx)-1]].ret > ops[k].ret {
		l.sorted = false
	}
	l.idx = append(l.idx, k)
	return l
}

func newLookahead(ops []lockOp, ow *owners) *lookahead {
	la := &lookahead{rels: map[int32]relList{}, refused: map[int32][]int32{}, orphanIR: map[int32]bool{},
		fresh: map[int32]relList{}, none: map[int32]relList{}, byOwner: map[int32]relList{}}
	for k := range ops {
		op := &ops[k]
		if op.kind != linRelease {
			continue
		}
		if op.out == outUnknown && !ow.isKnown(op.owner) {
			la.orphanIR[op.client] = true
		}
		if op.out == outNotOwner && !ow.isKnown(op.owner) {
			// Only these can own a key of ownerFresh, the one phantom asks
			// about.
			la.refused[op.client] = append(la.refused[op.client], int32(k))
		}
		if op.out != outOK {
			continue
		}
		la.rels[op.client] = la.rels[op.client].add(ops, int32(k))
		if !ow.isKnown(op.owner) {
			la.fresh[op.client] = la.fresh[op.client].add(ops, int32(k))
		}
		if op.owner == 0 {
			la.none[op.client] = la.none[op.client].add(ops, int32(k))
		} else {
			la.byOwner[op.owner] = la.byOwner[op.owner].add(ops, int32(k))
		}
	}
	return la
}

// releaseAhead reports whether a successful release that can free held
// state st (same client, matching owner) may still be placed (it returns
// now or later) at a point no later than dl. It asks only the releases
// that may match st's owner (lookahead): every release that owns st is in
// the lists it scans, and it checks owns on each.
func (s *sweep) releaseAhead(st lockState, dl int64) bool {
	la := s.look
	if la == nil {
		return true
	}
	switch {
	case st.owner == ownerFresh:
		return s.releaseIn(la.fresh[st.client], st, dl)
	case st.owner > 0:
		return s.releaseIn(la.byOwner[st.owner], st, dl) || s.releaseIn(la.none[st.client], st, dl)
	}
	return s.releaseIn(la.rels[st.client], st, dl)
}

// releaseIn is releaseAhead over the releases in l.
func (s *sweep) releaseIn(l relList, st lockState, dl int64) bool {
	rs := l.idx
	k := 0
	if l.sorted {
		k = sort.Search(len(rs), func(k int) bool { return s.ops[rs[k]].ret >= s.t })
	}
	for ; k < len(rs); k++ {
		r := &s.ops[rs[k]]
		if r.ret < s.t {
			continue // placed already
		}
		if r.call > dl {
			if l.sorted {
				return false
			}
			continue
		}
		if s.m.owns(st, r) {
			return true
		}
	}
	return false
}

// deadlineMatters reports whether the time held state st's lease surely
// expires (its deadline) can still matter: only to a successful release
// that frees it, placed before then.
func (s *sweep) deadlineMatters(st lockState) bool {
	if s.look == nil || s.m.reentrant {
		return true
	}
	return s.releaseAhead(st, s.m.deadline(st))
}

// anonymous is the holder of a lock taken by a lost acquire that no
// release can free any more (see phantom): which client it was makes no
// difference then, and the sweep forgets it.
const anonymous int32 = -3

// phantom reports whether held state st, just taken by a lost acquire of
// an unknown owner, can never be freed by a release: its client loses no
// release naming an unknown owner, and no successful release of it that
// matches comes before the lease surely expires, and no release of it
// refused as "not-owner" is still to come (it would see the lock). Such a
// lock ends only when taken over.
func (s *sweep) phantom(st lockState) bool {
	if s.look == nil || s.m.reentrant || st.owner != ownerFresh ||
		s.look.orphanIR[st.client] || s.releaseAhead(st, s.m.deadline(st)) {
		return false
	}
	// A release refused as not-owner sees who holds the lock too.
	for _, k := range s.look.refused[st.client] {
		if r := &s.ops[k]; r.ret >= s.t && s.m.owns(st, r) {
			return false
		}
	}
	return true
}

// reaches reports (read-write locks) whether a, placing the running
// operations b placed early and a did not, each with one outcome, and the
// lost operations b used and a did not, gets to a configuration that
// dominates b: then a can do all b can, since the
// next return explores those moves from a again (only between returns,
// s.reach: within one return's exploration, a's moves are what is being
// explored). Readers come and go in any order, and without it the
// configurations that placed some of the running reads early and not
// others would all stay open.
func (s *sweep) reaches(a, b *config) bool {
	if len(a.lin) > len(b.lin) || (len(a.lin) == len(b.lin) && usedTotal(a.used) >= usedTotal(b.used)) {
		return false
	}
	st, j := a.s, 0
	for _, y := range b.lin {
		if j < len(a.lin) && a.lin[j] == y {
			j++
			continue
		}
		op := &s.ops[y]
		s.bufReach = s.m.stepInto(s.bufReach[:0], st, op, op.out)
		if len(s.bufReach) != 1 {
			return false
		}
		st = s.bufReach[0]
	}
	if j != len(a.lin) || !s.usedLE(a, b) {
		return false
	}
	// The lost operations b used and a did not, oldest first, each with
	// its effect.
	for _, u := range b.used {
		p := &s.pools[u.pool]
		for k := max(a.usedOf(u.pool), p.live); k < u.n; k++ {
			if s.expiredOp(p.ops[k]) {
				// (A pool's live moves only when asked.) a cannot place
				// it in the restricted model, only in the full one:
				// then the first pass's failure is no proof.
				s.stats.Restricted++
			}
			op := &s.ops[p.ops[k]]
			s.bufReach = s.m.stepInto(s.bufReach[:0], st, op, op.out)
			switch len(s.bufReach) {
			case 1:
				st = s.bufReach[0]
			case 2:
				st = s.bufReach[1]
			default:
				return false
			}
		}
	}
	na := *a
	na.s, na.lin, na.used = st, b.lin, b.used
	switch {
	case st.held() && s.m.lease:
		na.failedUpTo = st.now
	case st.held():
		na.failedUpTo = history.Never
	case a.s.held() && s.m.lease:
		na.failedUpTo = st.now
	case a.s.held():
		na.failedUpTo = s.t
	}
	return s.dominates(&na, b)
}

// linCovers reports whether the running operations b placed early are
// those a did plus some that a could place now without effect, no later
// than b's clock: then a can catch up with b.
func (s *sweep) linCovers(a, b *config) bool {
	if len(a.lin) >= len(b.lin) {
		return false
	}
	j := 0
	for _, y := range b.lin {
		if j < len(a.lin) && a.lin[j] == y {
			j++
			continue
		}
		if !s.noop(a.s, y) || (s.m.lease && s.ops[y].call > b.s.now) {
			return false
		}
	}
	return j == len(a.lin)
}

// prune removes from s.next the configurations another one dominates.
func (s *sweep) prune() {
	n := len(s.next)
	if n < 2 {
		return
	}
	sameHolder := func(a, b *config) bool {
		return a.s.client == b.s.client && a.s.owner == b.s.owner && a.s.depth == b.s.depth && a.s.readers == b.s.readers
	}
	// Only configurations with the same holder can dominate each other:
	// group them (by index: configurations are large to move).
	s.order = s.order[:0]
	for i := range s.next {
		s.order = append(s.order, int32(i))
	}
	if n > 8 {
		slices.SortStableFunc(s.order, func(i, j int32) int {
			a, b := &s.next[i].s, &s.next[j].s
			if a.client != b.client {
				return cmpInt64(int64(a.client), int64(b.client))
			}
			if a.owner != b.owner {
				return cmpInt64(int64(a.owner), int64(b.owner))
			}
			if a.readers != b.readers {
				return cmpInt64(int64(a.readers), int64(b.readers))
			}
			return cmpInt64(int64(a.depth), int64(b.depth))
		})
	}
	s.keep = append(s.keep[:0], make([]bool, n)...)
	s.reach = s.m.rw && n <= rwPruneAll
	defer func() { s.reach = false }()
	for a := 0; a < n; {
		b := a + 1
		for b < n && sameHolder(&s.next[s.order[a]], &s.next[s.order[b]]) {
			b++
		}
		if n <= 8 || (s.m.rw && n <= rwPruneAll) {
			b = n // (read-write: see reaches)
		}
		for x := a; x < b; x++ {
			if s.halted() {
				return // (the sweep gives up: what it keeps no longer matters)
			}
			i := s.order[x]
			s.keep[i] = true
			for y := a; y < b; y++ {
				j := s.order[y]
				if j != i && s.dominates(&s.next[j], &s.next[i]) && (j < i || !s.dominates(&s.next[i], &s.next[j])) {
					// Of two equivalent ones, the first stays.
					s.keep[i] = false
					break
				}
			}
		}
		a = b
	}
	s.pruneFreeByExpired()
	out := s.next[:0]
	for i := range s.next {
		if s.keep[i] {
			out = append(out, s.next[i])
		}
	}
	s.next = out
}

// expiredHolder reports whether c's lock has a holder (of an exclusive
// lock) whose lease may have run out by c's clock.
func (s *sweep) expiredHolder(c *config) bool {
	return s.m.lease && !s.m.rw && c.s.client != 0 && s.m.expiry(c.s) <= c.s.now
}

// expiredOverFree reports whether a, whose holder's lease may have run out
// by its clock, dominates b, whose lock is free: such a holder does all a
// free lock does (from any point on, an acquire takes it over as it would
// take a free lock, a release refused to its client frees it, any other
// release leaves it), and more (refuse an acquire, take its client's
// release), so a does all b can with no more lost operations used, the
// same placed operations and no later clock. (Its failed acquires are
// placed up to its clock, b's up to its horizon, no later.)
func (s *sweep) expiredOverFree(a, b *config) bool {
	if b.s.held() || !s.expiredHolder(a) || a.s.now > b.s.now {
		return false
	}
	return (slices.Equal(a.lin, b.lin) || s.linCovers(a, b)) && s.usedLE(a, b)
}

// rwPruneAll is the most configurations that prune compares all with all
// (read-write locks, whose dominance may place moves: see reaches);
// beyond it, only those with the same holder, without moves.
const rwPruneAll = 64
