package checker

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/locktest/locktest/history"
)

// The sequential specification of the lock that both linearizability
// engines check against: the lock sweep (lockcheck.go) and porcupine
// (porcupine.go). One step function serves both, so that they can only
// disagree by how they search.

type linKind uint8

const (
	linAcquire linKind = iota
	linRelease
)

type linOutcome uint8

const (
	outOK       linOutcome = iota
	outHeld                // acquire failed: held
	outNotOwner            // release failed: not the owner
	outUnknown             // indeterminate
)

// lockOp is one lock operation as the engines see it: an acquire or a
// release with its outcome, its client, its owner id (interned; 0 when
// unknown) and its times. ret is history.Never for an indeterminate
// operation, which may take effect at any point after its call, or never.
type lockOp struct {
	kind linKind
	out  linOutcome
	// shared: an acquire in read mode (of a read-write lock).
	shared bool
	client int32
	owner  int32
	index  int32 // in History.Ops; -1 for a synthetic operation
	call   int64
	ret    int64
	// done is, for an indeterminate operation, when its client gave up on
	// it (the time its completion was recorded; Never when none was).
	done int64
}

// lockState is the model's state: who holds the lock (client 0: free) with
// which owner id (0: unknown, an indeterminate acquire) and how many times
// (depth, reentrant locks), when the lease was granted (in [acqCall,
// acqRet]) and, with a lease, now: a lower bound on the time of the last
// linearization point (points are monotone and each lies in its
// operation's [call, return]). The times are zero without a lease, where
// they never matter, so that equal states compare equal.
//
// A read-write lock has either one writer (the fields above) or a set of
// readers, each with its own owner, depth and grant times: readers names
// the set, interned by the model (readerSets; 0: no reader), so that a
// state stays a comparable value.
type lockState struct {
	client  int32
	owner   int32
	depth   int32
	readers int32
	acqCall int64
	acqRet  int64
	now     int64
}

// held reports whether anybody holds the lock: a writer (or the holder of
// an exclusive lock) or readers.
func (s lockState) held() bool { return s.client != 0 || s.readers != 0 }

// reader is one shared holder of a read-write lock.
type reader struct {
	client, owner, depth int32
	acqCall, acqRet      int64
}

// readerSets interns the sets of readers of a read-write lock: the states
// of the engines name a set by its index (0: the empty set). The sets are
// sorted and never change once interned. Safe for concurrent use, unless
// owned (a lock sweep's own table).
//
// A set is found by a hash of its readers (no key to build: a step that
// adds or removes one reader of fifty would otherwise copy them all into a
// string and hash that), and compared reader by reader. The sets are
// stored in chunks of readers. A lock sweep owns its table and compacts it
// (compact) to the sets it still uses, reusing the chunks of the others,
// so that memory follows the configurations open, not the length of the
// history, and a long check allocates a few chunks, not a set per step.
type readerSets struct {
	mu sync.Mutex
	// owned: one lock sweep owns the table (newSweep) and nobody else
	// uses it: no locking.
	owned bool
	sets  [][]reader
	index map[uint64]int32 // hash -> the last set interned with it
	next  []int32          // set -> the previous one with its hash (0: none)
	hash  []uint64         // set -> its hash
	span  []readerSpan     // set -> the span of its readers' grants
	// chunk is where the next set goes; chunks are those the sets are
	// in, spare those free for reuse.
	chunk         []reader
	chunks, spare [][]reader
	// The tables of the sets before the last compaction, for the next
	// one to reuse.
	oldSets [][]reader
	oldNext []int32
	oldHash []uint64
	oldSpan []readerSpan
}

func (t *readerSets) lock() {
	if !t.owned {
		t.mu.Lock()
	}
}

func (t *readerSets) unlock() {
	if !t.owned {
		t.mu.Unlock()
	}
}

// chunkReaders is the largest size of a chunk of readers (512 kB).
const chunkReaders = 1 << 14

func newReaderSets() *readerSets {
	return &readerSets{index: map[uint64]int32{}, sets: [][]reader{nil}, next: []int32{0}, hash: []uint64{0}, span: []readerSpan{{}}}
}

// readerSpan is, for a set of readers, the earliest and latest acqCall
// and the earliest acqRet among them: when the first and the last of their
// leases may have run out, and when the first surely has.
type readerSpan struct {
	minCall, maxCall, minRet int64
}

func spanOf(rs []reader) readerSpan {
	if len(rs) == 0 {
		return readerSpan{}
	}
	sp := readerSpan{minCall: rs[0].acqCall, maxCall: rs[0].acqCall, minRet: rs[0].acqRet}
	for _, r := range rs[1:] {
		sp.minCall, sp.maxCall, sp.minRet = min(sp.minCall, r.acqCall), max(sp.maxCall, r.acqCall), min(sp.minRet, r.acqRet)
	}
	return sp
}

// spanOf returns the span of set id (id > 0).
func (t *readerSets) spanOf(id int32) readerSpan {
	t.lock()
	defer t.unlock()
	return t.span[id]
}

// get returns set id (to read only).
func (t *readerSets) get(id int32) []reader {
	if id == 0 {
		return nil
	}
	t.lock()
	defer t.unlock()
	return t.sets[id]
}

// size is the number of sets interned.
func (t *readerSets) size() int {
	t.lock()
	defer t.unlock()
	return len(t.sets)
}

func cmpReader(a, b reader) int {
	switch {
	case a.client != b.client:
		return cmpInt64(int64(a.client), int64(b.client))
	case a.owner != b.owner:
		return cmpInt64(int64(a.owner), int64(b.owner))
	case a.acqCall != b.acqCall:
		return cmpInt64(a.acqCall, b.acqCall)
	case a.acqRet != b.acqRet:
		return cmpInt64(a.acqRet, b.acqRet)
	}
	return cmpInt64(int64(a.depth), int64(b.depth))
}

// hashReader hashes one reader. A set's hash is the sum of its readers'
// (hashReaders), so that a step that adds, removes or changes one reader of
// fifty finds its new set's hash from the old one's (withReaders) instead
// of hashing them all again.
func hashReader(r reader) uint64 {
	h := (uint64(uint32(r.client)) | uint64(uint32(r.owner))<<32) * 0x9e3779b97f4a7c15
	h ^= uint64(r.acqCall) * 0xc2b2ae3d27d4eb4f
	h ^= uint64(r.acqRet)*0x165667b19e3779f9 + uint64(r.depth)
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return h
}

// hashReaders is the hash of the set rs.
func hashReaders(rs []reader) uint64 {
	var h uint64
	for _, r := range rs {
		h += hashReader(r)
	}
	return h
}

// getHashed returns set id (to read only) and its hash.
func (t *readerSets) getHashed(id int32) ([]reader, uint64) {
	if id == 0 {
		return nil, 0
	}
	t.lock()
	defer t.unlock()
	return t.sets[id], t.hash[id]
}

// internSorted returns the id of the set of rs, sorted, with h its hash
// (hashReaders). It does not keep rs.
func (t *readerSets) internSorted(rs []reader, h uint64) int32 {
	if len(rs) == 0 {
		return 0
	}
	t.lock()
	defer t.unlock()
	first := t.index[h]
	for id := first; id != 0; id = t.next[id] {
		if slices.Equal(t.sets[id], rs) {
			return id
		}
	}
	return t.add(t.store(rs), h, first)
}

// store copies rs into a chunk.
func (t *readerSets) store(rs []reader) []reader {
	if len(rs) > chunkReaders/16 {
		return slices.Clone(rs)
	}
	if cap(t.chunk)-len(t.chunk) < len(rs) {
		if n := len(t.spare); n > 0 && cap(t.spare[n-1]) >= len(rs) {
			t.chunk, t.spare = t.spare[n-1], t.spare[:n-1]
		} else {
			// Small at first (a witness runs many small sweeps), then
			// doubling.
			t.chunk = make([]reader, 0, min(chunkReaders, max(256, 2*cap(t.chunk))))
		}
		t.chunks = append(t.chunks, t.chunk)
	}
	k := len(t.chunk)
	t.chunk = append(t.chunk, rs...)
	return t.chunk[k:len(t.chunk):len(t.chunk)]
}

func (t *readerSets) add(rs []reader, h uint64, prev int32) int32 {
	id := int32(len(t.sets))
	t.sets = append(t.sets, rs)
	t.next = append(t.next, prev)
	t.hash = append(t.hash, h)
	t.span = append(t.span, spanOf(rs))
	t.index[h] = id
	return id
}

// compact keeps only the sets *ids name, renumbering them (in place): every
// other id becomes invalid. Only the owner of the table may call it.
func (t *readerSets) compact(ids []*int32) {
	t.lock()
	defer t.unlock()
	sets, next, hash, span, chunks := t.sets, t.next, t.hash, t.span, t.chunks
	t.sets, t.next = append(t.oldSets[:0], nil), append(t.oldNext[:0], 0)
	t.hash, t.span = append(t.oldHash[:0], 0), append(t.oldSpan[:0], readerSpan{})
	t.chunk, t.chunks = nil, nil
	clear(t.index)
	renum := make(map[int32]int32, len(ids))
	for _, p := range ids {
		if *p == 0 {
			continue
		}
		id, ok := renum[*p]
		if !ok {
			h := hash[*p]
			id = t.add(t.store(sets[*p]), h, t.index[h])
			renum[*p] = id
		}
		*p = id
	}
	clear(sets)
	t.oldSets, t.oldNext, t.oldHash, t.oldSpan = sets[:0], next[:0], hash[:0], span[:0]
	// The sets kept are copied out: the old chunks are free.
	for _, c := range chunks {
		t.spare = append(t.spare, c[:0])
	}
}

// ownerFresh is the owner of a lock taken by an indeterminate acquire that
// did not name its owner: an id of its own (owners are unique per acquire),
// which no successful acquire carries.
const ownerFresh int32 = -1

// lockModel is the sequential specification of a (lease, reentrant,
// renewing) mutex.
//
// Owners: a release frees the lock only for the owner it names (0, unknown,
// matches any owner of the same client). Owners are unique per acquire,
// except on reentrant locks (Redisson's owner is one per client process),
// so on other locks a key written by an indeterminate acquire that did not
// name its owner (ownerFresh) can only be released by a release naming an
// owner no acquire in the history carries (ow.known).
type lockModel struct {
	lease      bool
	reentrant  bool
	renews     bool // a watchdog renews the lease while the holder lives
	ttl, slack int64
	// early is how long before its grant a lease may have been renewed
	// last: a session's lease (RunInfo.Session with Renews) is older than
	// the grant and was renewed up to TTL/3 before it, so it may expire
	// TTL - TTL/3 after the acquire was invoked. 0 for a lease taken by
	// the acquire itself.
	early int64
	ow    *owners // which owner ids an acquire carries; nil: all unknown
	// rw: a read-write lock (shared acquires take it as readers); rs
	// interns its reader sets.
	rw bool
	rs *readerSets
}

func newLockModel(info history.RunInfo, slack int64, ow *owners) lockModel {
	m := lockModel{
		lease:     info.Lease && info.TTLMillis > 0,
		reentrant: info.Reentrant,
		renews:    info.Renews,
		ttl:       info.TTLMillis * 1e6,
		slack:     slack,
		ow:        ow,
		rw:        info.ReadWrite,
	}
	if info.Session && info.Renews {
		m.early = m.ttl / 3
	}
	if !m.lease && info.Session && info.IdleTimeoutMillis > 0 {
		// A session the server ends when idle (MariaDB closes a
		// connection idle for wait_timeout): the holder's connection is
		// idle from its acquire on, so the lock is a lease of the idle
		// timeout, unless released first.
		m.lease, m.ttl = true, info.IdleTimeoutMillis*1e6
	}
	if m.rw {
		m.rs = newReaderSets()
	}
	return m
}

// expiry is the earliest time s's lease may have run out.
func (m lockModel) expiry(s lockState) int64 { return satAdd(s.acqCall, m.life()) }

// life is how long after its acquire was invoked a lease surely lasts.
func (m lockModel) life() int64 { return m.ttl - m.early - m.slack }

// deadline is the latest time at which s's holder may still release it
// successfully: its lease has surely run out after it. A renewed lease has
// none: it is possibly still valid at any time while its holder lives.
func (m lockModel) deadline(s lockState) int64 {
	if m.renews || !m.lease {
		return history.Never
	}
	return satAdd(s.acqRet, m.ttl+m.slack)
}

// owns reports whether in's client owns the writer's hold of s (the hold
// of an exclusive lock).
func (m lockModel) owns(s lockState, in *lockOp) bool {
	if s.client == 0 {
		return false
	}
	return m.ownsHold(s.client, s.owner, in)
}

// ownsHold reports whether in's client owns a hold of client with owner.
func (m lockModel) ownsHold(client, owner int32, in *lockOp) bool {
	if client != in.client {
		return false
	}
	switch {
	case owner == in.owner, owner == 0, in.owner == 0:
		return true
	case owner == ownerFresh:
		return !m.ow.isKnown(in.owner)
	}
	return false
}

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

// at returns s at time t (monotone) when the model tracks time.
func (m lockModel) at(s lockState, t int64) lockState {
	if m.lease {
		s.now = max(s.now, t)
	}
	return s
}

// taken is the state after in took the lock at point t. The lease was
// granted at some time in [in.call, in.ret]: for an indeterminate acquire,
// any time after its call (ret is Never), so its lease may have run out
// from call + TTL on, and when it surely has is unknown.
//
// (Taking the grant of an indeterminate acquire to be its point would be
// more precise, but would make a later point sometimes better - a later
// deadline - and every effect would no longer be monotone in time, which
// both engines' searches rely on.)
func (m lockModel) taken(in *lockOp, t int64) lockState {
	s := lockState{client: in.client, owner: in.owner, depth: 1}
	if in.owner == 0 && in.ret == history.Never && !m.reentrant {
		s.owner = ownerFresh
	}
	if m.lease {
		s.acqCall, s.acqRet, s.now = in.call, in.ret, t
	}
	return s
}

// reentered is s after its holder acquired again at lo. A nested call may
// refresh the lease (Redisson's does): acqCall stays the first grant's, the
// earliest the lease may expire, and acqRet moves to the latest return, the
// latest it may have been refreshed; both the lenient bound.
func (m lockModel) reentered(s lockState, in *lockOp, lo int64) lockState {
	s.depth++
	if s.owner == 0 {
		s.owner = in.owner
	}
	if m.lease {
		s.acqRet = max(s.acqRet, in.ret)
		s.now = lo
	}
	return s
}

// released is s after its holder released once at t.
func (m lockModel) released(s lockState, in *lockOp, t int64) lockState {
	if s.depth <= 1 {
		return m.free(t)
	}
	s.depth--
	if m.lease {
		s.acqRet = max(s.acqRet, in.ret)
		s.now = t
	}
	return s
}

func (m lockModel) free(t int64) lockState {
	if m.lease {
		return lockState{now: t}
	}
	return lockState{}
}

// step returns every state the lock can be in after in with outcome out
// from s; none when the step is impossible. The operation takes effect at a
// point p in [lo, in.ret], lo = max(s.now, in.call).
//
//   - acquire ok: the lock was free, or (lease) its holder's lease may have
//     expired by p: acqCall + TTL - slack <= p, or (reentrant) the client
//     owns it already: one level deeper.
//   - acquire failed (held): the lock was not free.
//   - release ok: the client owns the lock and (lease, not renewed) p <=
//     acqRet + TTL + slack, its lease not yet surely expired; free when the
//     last level goes.
//   - release failed (not-owner): the client does not own the lock, or
//     (lease) it does but its lease may have expired by p; then it is free.
//   - indeterminate: either no effect at all, or the effect of success.
func (m lockModel) step(s lockState, in *lockOp, out linOutcome) []lockState {
	return m.stepInto(nil, s, in, out)
}

// stepInto is step appending to dst.
func (m lockModel) stepInto(dst []lockState, s lockState, in *lockOp, out linOutcome) []lockState {
	lo := in.call
	if m.lease {
		lo = max(s.now, in.call)
		if lo > in.ret {
			return dst
		}
	}
	switch in.kind {
	case linAcquire:
		shared := m.rw && in.shared
		if out == outHeld {
			if s.held() {
				return append(dst, m.at(s, lo))
			}
			return dst
		}
		if out == outUnknown {
			dst = append(dst, s)
		}
		if shared {
			return m.readAcquire(dst, s, in, lo)
		}
		// take is the earliest point at which in can take the lock, or
		// false when it cannot by in.ret.
		take, can := lo, !s.held()
		if !can && m.lease {
			take = max(lo, m.expiryAll(s))
			can = take <= in.ret
		}
		if can {
			dst = append(dst, m.taken(in, take))
		}
		if m.reentrant && m.owns(s, in) {
			dst = append(dst, m.reentered(s, in, lo))
		}
		return dst
	case linRelease:
		if s.readers != 0 {
			return m.readRelease(dst, s, in, out, lo)
		}
		owns := m.owns(s, in)
		switch out {
		case outOK:
			if owns && (!m.lease || lo <= m.deadline(s)) {
				return append(dst, m.released(s, in, lo))
			}
		case outNotOwner:
			if !owns {
				return append(dst, m.at(s, lo))
			}
			if m.lease {
				if t := max(lo, m.expiry(s)); t <= in.ret {
					return append(dst, m.free(t))
				}
			}
		case outUnknown:
			dst = append(dst, s)
			if owns {
				dst = append(dst, m.released(s, in, lo))
			}
		}
	}
	return dst
}

// Read-write locks: a writer excludes everybody, readers share. A state has
// a writer (client) or readers, never both.
//
//   - read acquire ok: no writer, or (lease) the writer's lease may have
//     expired by p: it joins the readers. On a reentrant lock, a client
//     that owns a reader already nests on it instead.
//   - write acquire ok: nobody holds it, or (lease) every holder's lease may
//     have expired by p.
//   - acquire failed (held), read or write: somebody holds it. A reader
//     refused while only readers hold the lock is allowed: a
//     writer-preferring lock (Curator's) queues readers behind a waiting
//     writer, whom the state does not show; the readers-share property
//     reports whether readers did share.
//   - a release frees the hold, writer or reader, its client owns, as for
//     an exclusive lock, each reader with its own lease.

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

func (m lockModel) name() string {
	switch {
	case m.rw && m.lease && m.renews:
		return "renewed-lease read-write lock"
	case m.rw && m.lease:
		return "lease read-write lock"
	case m.rw:
		return "read-write lock"
	case m.lease && m.renews:
		return "renewed-lease mutex"
	case m.lease:
		return "lease mutex"
	}
	return "mutex"
}

// owners interns owner ids for the engines: 0 is the unknown owner. known
// marks the ids an acquire carries.
type owners struct {
	ids   map[string]int32
	names []string
	known []bool
}

// newOwners interns owners, about n of them (0: unknown).
func newOwners(n int) *owners {
	return &owners{ids: make(map[string]int32, n), names: []string{""}, known: []bool{false}}
}

// isKnown reports whether an acquire in the history carries owner id.
func (o *owners) isKnown(id int32) bool {
	return o != nil && id > 0 && int(id) < len(o.known) && o.known[id]
}

func (o *owners) id(name string) int32 {
	if name == "" {
		return 0
	}
	if id, ok := o.ids[name]; ok {
		return id
	}
	id := int32(len(o.names))
	o.ids[name] = id
	o.names = append(o.names, name)
	o.known = append(o.known, false)
	return id
}

func (o *owners) name(id int32) string {
	if id <= 0 || int(id) >= len(o.names) {
		return ""
	}
	return o.names[id]
}

// lockOpOf converts a history operation; ok is false for operations the
// lock checks do not need: reads and writes, and acquires and releases
// that failed for another reason than "held" or "not-owner" (an error, a
// timeout): the model allows those in every state without effect, so
// dropping them is exact.
func lockOpOf(op *history.Operation, ow *owners) (lockOp, bool) {
	var k linKind
	switch op.Op {
	case history.Acquire:
		k = linAcquire
	case history.Release:
		k = linRelease
	default:
		return lockOp{}, false
	}
	lo := lockOp{kind: k, client: int32(op.Client), call: op.Call, ret: op.Return, index: int32(op.Index),
		shared: k == linAcquire && op.Mode == history.ModeRead}
	switch {
	case op.Type == history.OK:
		lo.out = outOK
	case op.Type == history.Info || op.Return == history.Never:
		lo.out, lo.ret, lo.done = outUnknown, history.Never, op.Completed
	case k == linAcquire && op.Reason == history.ReasonHeld:
		lo.out = outHeld
	case k == linRelease && op.Reason == history.ReasonNotOwner:
		lo.out = outNotOwner
	default:
		return lockOp{}, false
	}
	if lo.out != outHeld {
		lo.owner = ow.id(op.Owner) // (a failed acquire names nobody)
	}
	if k == linAcquire && lo.owner > 0 {
		ow.known[lo.owner] = true
	}
	return lo, true
}

func describeLin(in *lockOp, ow *owners) string {
	verb := "acquire"
	if in.kind == linRelease {
		verb = "release"
	} else if in.shared {
		verb = "read acquire"
	}
	res := [...]string{"ok", "held", "not-owner", "indeterminate"}[in.out]
	if n := ow.name(in.owner); n != "" {
		return fmt.Sprintf("client %d %s(%s) -> %s", in.client, verb, n, res)
	}
	return fmt.Sprintf("client %d %s -> %s", in.client, verb, res)
}

// describeStateRW describes s, naming the readers of a read-write lock (rs:
// the model's reader sets).
func describeStateRW(s lockState, ow *owners, rs *readerSets) string {
	if s.readers != 0 && rs != nil {
		var sb strings.Builder
		sb.WriteString("held by readers: ")
		for k, r := range rs.get(s.readers) {
			if k > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "client %d", r.client)
			if r.owner == ownerFresh {
				sb.WriteString(" (owner unknown)")
			} else if n := ow.name(r.owner); n != "" {
				fmt.Fprintf(&sb, " (%s)", n)
			}
			if r.depth > 1 {
				fmt.Fprintf(&sb, " %d times", r.depth)
			}
		}
		return sb.String()
	}
	if s.client == 0 {
		return "free"
	}
	if s.client < 0 {
		return "held by a lost acquire of some client, which no release could free"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "held by client %d", s.client)
	if s.owner == ownerFresh {
		sb.WriteString(" (owner unknown)")
	} else if n := ow.name(s.owner); n != "" {
		fmt.Fprintf(&sb, " (%s)", n)
	}
	if s.depth > 1 {
		fmt.Fprintf(&sb, " %d times", s.depth)
	}
	return sb.String()
}
