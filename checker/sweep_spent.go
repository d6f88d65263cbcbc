package checker

import (
	"sort"

	"github.com/locktest/locktest/history"
)

// Spent lost acquires: interchangeable lost acquires that a configuration
// counts rather than names (see usedLE and checker/README.md, "Spent lost
// acquires").
//
// A lost acquire of client c naming no owner takes the lock, if it takes
// it at all, with a key of its own (ownerFresh) that only a release of c
// naming no known owner can free. Once no such release of c is left
// (phantom: none lost, none still to return), nothing can tell that key
// from another client's: the sweep names the holder anonymous. And once
// its lease may have run out by a configuration's clock (call + TTL -
// slack <= now), whenever it is used from then on it installs a holder
// whose lease may already have expired at its point, so its invocation no
// longer matters either. Such lost acquires are *spent*: using any of them,
// at any point a configuration can still reach, gives the same state. So
// two configurations that differ only by which clients' spent acquires
// they used compare by how many of them they have left.

// spentClock is the clock at which dominance between a and b counts spent
// lost acquires (the earlier of their clocks: both can only use an acquire
// at or after it), or false when the model has none: it needs a lease, an
// exclusive lock that is not reentrant (a lost acquire's key is then
// ownerFresh and the holder anonymous), and the whole history (phantom).
func (s *sweep) spentClock(a, b *config) (int64, bool) {
	if !s.m.lease || s.m.rw || s.m.reentrant || s.look == nil {
		return 0, false
	}
	return min(a.s.now, b.s.now), true
}

// spent returns how many of pool id's oldest operations are spent at clock
// t (0 when none or the pool's client may still free its key). A pool's
// operations come in order of invocation, so the spent ones are a prefix.
func (s *sweep) spent(id int32, t int64) int32 {
	p := &s.pools[id]
	if p.kind != linAcquire || p.owner != 0 || p.shared {
		return 0
	}
	n := p.spentN
	if p.spentT != t || p.spentLen != int32(len(p.ops)) || p.spentLen == 0 {
		// (Memoized: dominance asks the same pool at the same clock
		// over and over within a return.)
		life := s.m.life()
		n = int32(sort.Search(len(p.ops), func(k int) bool { return satAdd(s.ops[p.ops[k]].call, life) > t }))
		p.spentT, p.spentLen, p.spentN = t, int32(len(p.ops)), n
	}
	if n == 0 || !s.phantomClient(id) {
		return 0
	}
	return n
}

// phantomClient reports whether the key of a lost acquire of pool id's
// client (naming no owner) can no longer be freed by any release (phantom).
// It stays so once it is (fewer releases are to come as the sweep goes
// on), which the pool remembers.
func (s *sweep) phantomClient(id int32) bool {
	p := &s.pools[id]
	if p.phantom {
		return true
	}
	if p.notPhantomAt == s.t && s.t != 0 {
		return false // (asked already at this time)
	}
	st := lockState{client: p.client, owner: ownerFresh, depth: 1, acqRet: history.Never}
	p.phantom, p.notPhantomAt = s.phantom(st), s.t
	return p.phantom
}

// pruneFreeByExpired drops (s.keep) the free configurations that one whose
// holder's lease may have run out dominates (expiredOverFree): prune
// compares only configurations with the same holder when there are many.
func (s *sweep) pruneFreeByExpired() {
	if len(s.next) <= 8 || !s.m.lease || s.m.rw {
		return
	}
	s.expiredIdx = s.expiredIdx[:0]
	for i := range s.next {
		if s.keep[i] && s.expiredHolder(&s.next[i]) {
			s.expiredIdx = append(s.expiredIdx, int32(i))
		}
	}
	if len(s.expiredIdx) == 0 {
		return
	}
	for i := range s.next {
		if !s.keep[i] || s.next[i].s.held() {
			continue
		}
		for _, j := range s.expiredIdx {
			if s.expiredOverFree(&s.next[j], &s.next[i]) {
				s.keep[i] = false
				break
			}
		}
	}
}

// ruleCounts counts how often the rules of issue 17's shape decided
// something (for tests: they show a history exercises them): a dominance
// that counted spent lost acquires, an expired holder that dominated a
// free lock, and a refused release placed at once (refusedCommutes).
type ruleCounts struct {
	spent, expiredOverFree, refusedAtOnce int64
}

// usedLESpent is usedLE counting spent lost acquires at clock t: pool by
// pool, a has every operation b has left that is not spent (max(n_a, k) <=
// max(n_b, k), k the pool's spent prefix), and at least as many spent ones
// in all.
func (s *sweep) usedLESpent(a, b *config, t int64) bool {
	spentA, spentB := int32(0), int32(0)
	i, j := 0, 0
	for i < len(a.used) || j < len(b.used) {
		var id, na, nb int32
		switch {
		case j == len(b.used) || (i < len(a.used) && a.used[i].pool < b.used[j].pool):
			id, na = a.used[i].pool, a.used[i].n
			i++
		case i == len(a.used) || b.used[j].pool < a.used[i].pool:
			id, nb = b.used[j].pool, b.used[j].n
			j++
		default:
			id, na, nb = a.used[i].pool, a.used[i].n, b.used[j].n
			i++
			j++
		}
		p := &s.pools[id]
		na, nb = max(na, p.live), max(nb, p.live)
		if na == nb {
			continue
		}
		k := s.spent(id, t)
		spentA += max(k-na, 0)
		spentB += max(k-nb, 0)
		if max(na, k) <= max(nb, k) {
			continue
		}
		if s.capacity > 0 && int32(len(p.ops))-na >= s.capacity {
			s.stats.Approx++
			continue
		}
		return false
	}
	if spentA < spentB {
		return false
	}
	s.rules.spent++
	return true
}
