package checker

import (
	"slices"

	"github.com/locktest/locktest/history"
)

// The read-write side of the lock model: readers, their sets, and the
// steps of read acquires and releases.

// readersOf returns the readers of s (to read only).
func (m lockModel) readersOf(s lockState) []reader {
	if s.readers == 0 {
		return nil
	}
	return m.rs.get(s.readers)
}

// ownsAny reports whether in's client owns a hold of s, writer or reader.
func (m lockModel) ownsAny(s lockState, in *lockOp) bool {
	if m.owns(s, in) {
		return true
	}
	for _, r := range m.readersOf(s) {
		if m.ownsHold(r.client, r.owner, in) {
			return true
		}
	}
	return false
}

// expiryAll is the earliest time every hold of s may have run out: when a
// writer may take it over.
func (m lockModel) expiryAll(s lockState) int64 {
	e := int64(-history.Never)
	if s.client != 0 {
		e = m.expiry(s)
	}
	if s.readers != 0 {
		// (satAdd is monotone: the latest acqCall gives the latest.)
		e = max(e, satAdd(m.rs.spanOf(s.readers).maxCall, m.life()))
	}
	return e
}

// deadlineOwned is the earliest deadline (see deadline) among the holds
// of s that in's client owns; Never when it owns none.
func (m lockModel) deadlineOwned(s lockState, in *lockOp) int64 {
	d := history.Never
	if m.owns(s, in) {
		d = m.deadline(s)
	}
	if m.renews || !m.lease {
		return d
	}
	for _, r := range m.readersOf(s) {
		if m.ownsHold(r.client, r.owner, in) {
			d = min(d, satAdd(r.acqRet, m.ttl+m.slack))
		}
	}
	return d
}

// readAcquire appends the states after shared acquire in succeeded from s
// at a point in [lo, in.ret].
func (m lockModel) readAcquire(dst []lockState, s lockState, in *lockOp, lo int64) []lockState {
	base, take := s, lo
	if s.client != 0 {
		if !m.lease {
			return dst
		}
		take = max(lo, m.expiry(s))
		if take > in.ret {
			return dst
		}
		base = lockState{}
	}
	rs, h := m.readersHashed(base)
	// The sets are built in buf (intern copies them).
	var buf [64]reader
	if m.reentrant {
		nested := false
		for k, r := range rs {
			if m.ownsHold(r.client, r.owner, in) {
				nested = true
				next := append(buf[:0], rs...)
				next[k].depth++
				if m.lease {
					next[k].acqRet = max(r.acqRet, in.ret)
				}
				dst = append(dst, m.withReaders(base, next, take, h-hashReader(r)+hashReader(next[k]), false))
			}
		}
		if nested {
			return dst
		}
	}
	r := reader{client: in.client, owner: in.owner, depth: 1}
	if in.owner == 0 && in.ret == history.Never && !m.reentrant {
		r.owner = ownerFresh
	}
	if m.lease {
		r.acqCall, r.acqRet = in.call, in.ret
	}
	// In order, as the sets are kept.
	k, _ := slices.BinarySearchFunc(rs, r, cmpReader)
	next := append(append(append(buf[:0], rs[:k]...), r), rs[k:]...)
	return append(dst, m.withReaders(base, next, take, h+hashReader(r), true))
}

// readersHashed returns the readers of s (to read only) and the hash of
// their set (hashReaders).
func (m lockModel) readersHashed(s lockState) ([]reader, uint64) {
	if s.readers == 0 {
		return nil, 0
	}
	return m.rs.getHashed(s.readers)
}

// withReaders is s with readers rs, at point t; h is the hash of rs
// (hashReaders), sorted whether rs is in order already (one reader's depth
// and lease changed may move it).
func (m lockModel) withReaders(s lockState, rs []reader, t int64, h uint64, sorted bool) lockState {
	if len(rs) == 0 {
		return m.free(t)
	}
	if !sorted && !slices.IsSortedFunc(rs, cmpReader) {
		slices.SortFunc(rs, cmpReader)
	}
	s = lockState{readers: m.rs.internSorted(rs, h)}
	if m.lease {
		s.now = t
	}
	return s
}

// readRelease appends the states after release in with outcome out from s,
// held by readers, at a point in [lo, in.ret].
func (m lockModel) readRelease(dst []lockState, s lockState, in *lockOp, out linOutcome, lo int64) []lockState {
	rs, h := m.readersHashed(s)
	owned := false
	if out == outUnknown {
		dst = append(dst, s)
	}
	// The sets are built in buf (intern copies them).
	var buf [64]reader
	// The readers are sorted by client: only in's client's can be its.
	k0, _ := slices.BinarySearchFunc(rs, in.client, func(r reader, c int32) int { return cmpInt64(int64(r.client), int64(c)) })
	for k := k0; k < len(rs) && rs[k].client == in.client; k++ {
		r := rs[k]
		if !m.ownsHold(r.client, r.owner, in) {
			continue
		}
		owned = true
		t := lo
		switch out {
		case outOK:
			if m.lease && !m.renews && lo > satAdd(r.acqRet, m.ttl+m.slack) {
				continue // its lease had surely run out
			}
		case outNotOwner:
			// Refused to its owner: only once its lease may have run out,
			// and then it is gone.
			if !m.lease {
				continue
			}
			if t = max(lo, satAdd(r.acqCall, m.life())); t > in.ret {
				continue
			}
			dst = append(dst, m.withReaders(s, append(append(buf[:0], rs[:k]...), rs[k+1:]...), t, h-hashReader(r), true))
			continue
		}
		var next []reader
		nh := h - hashReader(r)
		if r.depth > 1 {
			next = append(buf[:0], rs...)
			next[k].depth--
			if m.lease {
				next[k].acqRet = max(r.acqRet, in.ret)
			}
			nh += hashReader(next[k])
		} else {
			next = append(append(buf[:0], rs[:k]...), rs[k+1:]...)
		}
		dst = append(dst, m.withReaders(s, next, t, nh, r.depth <= 1))
	}
	if out == outNotOwner && !owned {
		dst = append(dst, m.at(s, lo))
	}
	return dst
}
