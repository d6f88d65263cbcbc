package checker

import (
	"slices"
	"sort"

	"github.com/locktest/locktest/history"
)

// The lock sweep on read-write locks: which running and lost operations
// may wait, when a writer may go, and the reader sets' compaction.

// compactSets drops the reader sets no open configuration uses (only the
// frontier holds sets between returns), and sets when to do it again: once
// the table has grown four times as large, so that it costs O(1) per set
// interned.
func (s *sweep) compactSets() {
	ids := make([]*int32, len(s.frontier))
	for k := range s.frontier {
		ids[k] = &s.frontier[k].s.readers
	}
	s.m.rs.compact(ids)
	// The sets are renumbered: forget what was remembered by set (the
	// next return may come at the same time).
	s.expiredOf, s.expired, s.passedOf, s.passed = 0, false, 0, false
	s.compactAt = max(s.minCompact, 4*s.m.rs.size())
}

// minCompact is the fewest reader sets a sweep's table holds before it is
// compacted.
const minCompact = 1 << 14

// poolMovesRW tries the indeterminate operations that can change d's
// read-write lock, held: any lost acquire (a reader may join readers, and
// a lease may have run out), and the lost releases of its holders.
func (s *sweep) poolMovesRW(d *config, tryIA func(int32)) {
	st := d.s
	// Without building their states: held by readers, a lost writer needs
	// every reader's lease to have possibly run out by now; a lost reader
	// (not reentrant) joins only for a release of its client that may free
	// it (rwDeferrable).
	s.lostAcquires(d, st.client != 0 || (s.m.lease && s.m.expiryAll(st) <= s.t), tryIA)
	x := &s.ops[s.x]
	// The lost releases of a client whose leave can wait (rwDeferrable,
	// without building their states).
	writerOK := s.writerFits && x.kind == linAcquire && !x.shared && x.out == outOK
	waits := st.client == 0 && !(s.m.lease && s.writerFits && (writerOK || s.anyWriter(d)) && s.mayExpire(st, nil))
	tryIR := func(client, owner int32) {
		if waits && client != x.client && s.leaveDeferrable(d, client, writerOK) {
			return
		}
		s.freeing(client, owner, func(id int32) bool {
			p := &s.pools[id]
			if u := s.avail(d, id); u < int32(len(p.ops)) && s.m.ownsAny(st, &s.ops[p.ops[u]]) {
				s.apply(d, p.ops[u], id, false)
			}
			return true
		})
	}
	if st.client != 0 {
		tryIR(st.client, st.owner)
	}
	rs := s.m.readersOf(st)
	if waits && !s.writerFits {
		// No writer may take the lock before x: only the leaves of x's
		// client's readers may be needed (leaveDeferrable), and the
		// readers are sorted by client.
		k, _ := slices.BinarySearchFunc(rs, x.client, func(r reader, c int32) int { return cmpInt64(int64(r.client), int64(c)) })
		for ; k < len(rs) && rs[k].client == x.client; k++ {
			tryIR(rs[k].client, rs[k].owner)
		}
		return
	}
	for _, r := range rs {
		tryIR(r.client, r.owner)
	}
}

// rwDeferrable reports (read-write locks) whether move y, a reader joining
// or leaving d's lock, can wait until after the returning operation x
// (s.x): readers joining and leaving commute with each other and with
// every operation that does not need them, so only the moves x may need
// go first (just in time), and the others no earlier than the return that
// needs them. A writer may take the lock before x only when every reader
// may have expired (lease) or can leave first (writerMayGo); otherwise no
// move has to make way for one. With a lease, when a writer may take over
// expired readers before x, every move may be needed. Otherwise a join is
// needed by a failed acquire when nobody holds the lock, by x of the same
// client (its release, a nested acquire), by a running release of its own
// client, or, for a running one, by a writer (x or one before it) that
// would keep it out until it returns when it can also leave before (lease,
// or a lost release of its client); a lost reader's join (not reentrant)
// only by such a failed acquire and a release that may free it; a leave by
// x of the same client, when its successful release must come before the
// reader's lease surely runs out, and to make way for a writer (x, or one
// that may take the lock before x: of x's client, any with a lease, and any
// when x is a reader joining, who would keep it out): then every reader
// must leave, and the leaves commute, so they are tried in the order of
// the readers.
func (s *sweep) rwDeferrable(d *config, y *lockOp) bool {
	if d.s.client != 0 {
		return false // a writer holds: the move is not a reader's
	}
	x := &s.ops[s.x]
	if y.kind == linAcquire && !y.shared {
		return false
	}
	if y.ret == history.Never && y.kind == linAcquire && !s.m.reentrant {
		// A lost reader joining before a writer takes over is gone with
		// it, as if it never joined (which it may not), and it changes
		// nothing else but for a failed acquire when nobody holds the
		// lock, and a release of its client that may free it (or, on a
		// reentrant lock, a reader of its client nesting on it, with its
		// earlier lease).
		return !(x.out == outHeld && !d.s.held()) && !s.mayFree(d, y)
	}
	if x.client == y.client {
		return false
	}
	// No writer can take the lock before x while a reader stays that
	// neither may have expired nor can leave first: then no move needs
	// to make way for one.
	writerOK := s.writerFits && x.kind == linAcquire && !x.shared && x.out == outOK
	// With a lease, a writer may take over expired readers: whether a
	// reader joined or left before that matters.
	takeover := s.m.lease && s.writerFits && (writerOK || s.anyWriter(d)) && s.mayExpire(d.s, y)
	if y.kind == linAcquire {
		// A failed acquire needs a holder only when nobody holds the lock
		// (readers joining then would not change where it can go: their
		// leases do not depend on their points).
		needHolder := x.out == outHeld && !d.s.held()
		// A running reader may have to join before a writer that would
		// keep it out until it returns, when it can also leave first (a
		// lost release of its client, or a lease).
		if y.ret != history.Never && s.joinBeforeWriter(d, x, writerOK, y) {
			return false
		}
		return !(takeover || needHolder || s.releasing(y.client))
	}
	// A release: of a reader of its client, or a no-op.
	if s.m.lease && !s.m.renews && y.out == outOK {
		if s.deadlinePassed(d.s) {
			// (Readers are sorted by client.)
			rs := s.m.readersOf(d.s)
			k := sort.Search(len(rs), func(k int) bool { return rs[k].client >= y.client })
			for ; k < len(rs) && rs[k].client == y.client; k++ {
				if satAdd(rs[k].acqRet, s.m.ttl+s.m.slack) < s.t {
					return false
				}
			}
		}
	}
	return !takeover && s.leaveDeferrable(d, y.client, writerOK)
}

// fewMoves reports (read-write locks) whether, in d, the node explored,
// rwDeferrable lets every running operation wait but those waits lets
// through: no writer holds, none may take the lock before the returning
// operation (writerMayGo), and the returning operation is not a failed
// acquire on a free lock. Then a running read acquire waits unless a
// release of its client is running, and a release unless (lease) its
// successful release may come after a reader's deadline; write acquires
// and the returning operation's client's operations are tried.
func (s *sweep) fewMoves(d *config) bool {
	x := &s.ops[s.x]
	return d.s.client == 0 && !s.writerFits && !(x.out == outHeld && !d.s.held())
}

// fewRunningMoves tries, under fewMoves, the running operations of d, the
// node explored, that may not wait (rwDeferrable decides, in apply), x
// being the returning operation, found through the running operations by
// kind and client rather than by asking each: the write acquires, the
// operations of x's client, the read acquires of a client with a release
// running, and (lease) the successful releases when a reader's deadline
// may have passed.
func (s *sweep) fewRunningMoves(d *config, x int32) {
	xc := s.ops[x].client
	try := func(y int32) {
		if y != x && d.hasLin(y) < 0 && !slices.Contains(s.deferred, y) {
			s.apply(d, y, -1, false)
		}
	}
	// (Each operation in one of the groups only.)
	for _, y := range s.runningWriters {
		try(y)
	}
	mine := xc < 0 || int(xc) >= len(s.runningOf) || s.runningOf[xc] > 0
	if mine {
		for _, y := range s.inflight {
			if op := &s.ops[y]; op.client == xc && !(op.kind == linAcquire && !op.shared) {
				try(y)
			}
		}
	}
	for _, c := range s.relClients {
		if c == xc || (c >= 0 && int(c) < len(s.runningReadsOf) && s.runningReadsOf[c] == 0) {
			continue
		}
		for _, y := range s.inflight {
			if op := &s.ops[y]; op.client == c && op.kind == linAcquire && op.shared {
				try(y)
			}
		}
	}
	if s.m.lease && !s.m.renews && s.deadlinePassed(d.s) {
		for _, y := range s.runningReleases {
			if op := &s.ops[y]; op.client != xc && op.out == outOK {
				try(y)
			}
		}
	}
}

// leaveDeferrable is rwDeferrable for a reader of client, not the
// returning operation's, leaving d's lock, held by readers, when no writer
// may take over expired readers before x (and, for a successful release,
// its deadline is not the reason): it is needed only to make way for a
// writer.
func (s *sweep) leaveDeferrable(d *config, client int32, writerOK bool) bool {
	x := &s.ops[s.x]
	// x, a reader joining, keeps out every writer after it (without a
	// lease, until its client releases): one may have to go first.
	readerOK := x.kind == linAcquire && x.shared && x.out == outOK
	if s.writerFits && (writerOK || s.xWriter(d) || ((s.m.lease || readerOK) && s.anyWriter(d))) {
		// To make way for a writer, every reader must leave: in the order
		// of the readers (leaves commute), the first one first.
		rs := s.m.readersOf(d.s)
		return len(rs) > 0 && rs[0].client != client
	}
	return true
}

// writerMayGo reports (read-write locks) whether a writer may take d's
// lock before the operation returning now (s.x): every reader of d may
// have expired by now (lease: a writer takes over expired readers) or can
// leave first, by a running release of its client not placed yet (other
// than x, which comes last) or a lost one left. A writer holding d's lock
// is not a reader's business (rwDeferrable tries every move then).
func (s *sweep) writerMayGo(d *config) bool {
	e := s.m.life()
	prev, ok := int32(0), false
	for _, r := range s.m.readersOf(d.s) {
		if s.m.lease && satAdd(r.acqCall, e) <= s.t {
			continue
		}
		if r.client != prev {
			prev, ok = r.client, s.releasing(r.client)
		}
		if !ok && !s.lostRelease(d, r.client, r.owner) {
			return false
		}
	}
	return true
}

// deadlinePassed reports (lease, not renewed) whether the lease of a
// reader of st has surely run out by now (remembered for the last set
// asked).
func (s *sweep) deadlinePassed(st lockState) bool {
	if s.passedOf == st.readers && s.passedAt == s.t {
		return s.passed
	}
	// (satAdd is monotone: the reader with the earliest acqRet has the
	// earliest deadline.)
	s.passedOf, s.passedAt = st.readers, s.t
	s.passed = st.readers != 0 && satAdd(s.m.rs.spanOf(st.readers).minRet, s.m.ttl+s.m.slack) < s.t
	return s.passed
}

// mayExpire reports (lease) whether a reader of st, or the one y (if not
// nil) would add, may have expired by now: a writer may take it over.
func (s *sweep) mayExpire(st lockState, y *lockOp) bool {
	e := s.m.life()
	if y != nil && y.kind == linAcquire && satAdd(y.call, e) <= s.t {
		return true
	}
	if s.expiredOf == st.readers && s.expiredAt == s.t {
		return s.expired
	}
	// (satAdd is monotone: the reader with the earliest acqCall expires
	// first.)
	s.expiredOf, s.expiredAt = st.readers, s.t
	s.expired = st.readers != 0 && satAdd(s.m.rs.spanOf(st.readers).minCall, e) <= s.t
	return s.expired
}

// joinBeforeWriter reports whether running read acquire y may have to
// join before a writer (x, or one that may take the lock before x): the
// writer would keep it out until it returns (no lease, or the writer's
// lease cannot have expired by then), and y can be gone before the writer
// (a lost release of its client, or its own lease may have expired).
func (s *sweep) joinBeforeWriter(d *config, x *lockOp, writerOK bool, y *lockOp) bool {
	e := s.m.life()
	if !s.writerFits || !s.lostRelease(d, y.client, y.owner) && !(s.m.lease && satAdd(y.call, e) <= s.t) {
		return false
	}
	blocks := func(w *lockOp) bool { return !s.m.lease || satAdd(w.call, e) > y.ret }
	if writerOK && blocks(x) {
		return true
	}
	for _, k := range s.inflight {
		if w := &s.ops[k]; w.kind == linAcquire && !w.shared && w.out == outOK && d.hasLin(k) < 0 && blocks(w) {
			return true
		}
	}
	for _, id := range s.lostAcqAll {
		p := &s.pools[id]
		if u := s.avail(d, id); !p.shared && u < int32(len(p.ops)) && blocks(&s.ops[p.ops[u]]) {
			return true
		}
	}
	return false
}

// mayFree reports whether the reader that lost read acquire y would add
// may be freed by the returning operation or a running release not placed
// in d.
func (s *sweep) mayFree(d *config, y *lockOp) bool {
	owner := y.owner
	if owner == 0 {
		owner = ownerFresh // (not reentrant: see readAcquire)
	}
	frees := func(k int32) bool {
		op := &s.ops[k]
		return op.kind == linRelease && s.m.ownsHold(y.client, owner, op)
	}
	if frees(s.x) {
		return true
	}
	for _, k := range s.inflight {
		if frees(k) && d.hasLin(k) < 0 {
			return true
		}
	}
	return false
}

// releasing reports whether client has a running release not placed in
// the node explored, other than the returning operation: a reader joining
// may be what it releases.
func (s *sweep) releasing(client int32) bool {
	return int(client) < len(s.relOpen) && s.relOpen[client]
}

// freesLostReader reports whether a release of client c, running and not
// placed in the node explored (relFresh) or returning, may free a reader
// that a lost read acquire of c adds (mayFree): without it, c's lost
// readers can only wait. (A lost acquire naming its owner: always.)
func (s *sweep) freesLostReader(c int32) bool {
	if s.relFresh[c] || (int(c) < len(s.lostReadOwned) && s.lostReadOwned[c]) {
		return true
	}
	x := &s.ops[s.x]
	return x.kind == linRelease && s.m.ownsHold(c, ownerFresh, x)
}

// openReleases notes (relOpen) the clients with a running release not
// placed in d, the node explored, other than the returning operation.
func (s *sweep) openReleases(d *config) {
	for _, c := range s.relClients {
		s.relOpen[c], s.relFresh[c] = false, false
	}
	s.relClients = s.relClients[:0]
	for _, y := range s.runningReleases {
		if op := &s.ops[y]; y != s.x && d.hasLin(y) < 0 {
			s.relOpen, s.relFresh = grown(s.relOpen, int(op.client)), grown(s.relFresh, int(op.client))
			if !s.relOpen[op.client] {
				s.relOpen[op.client] = true
				s.relClients = append(s.relClients, op.client)
			}
			if !s.relFresh[op.client] && s.m.ownsHold(op.client, ownerFresh, op) {
				s.relFresh[op.client] = true
			}
		}
	}
}

// anyWriter is writerOf(d, -1) for d, the node explored (computed once).
func (s *sweep) anyWriter(d *config) bool {
	if s.writerAny == 0 {
		s.writerAny = 1
		if s.writerOf(d, -1) {
			s.writerAny = 2
		}
	}
	return s.writerAny == 2
}

// xWriter is writerOf(d, client of the returning operation) for d, the
// node explored (computed once).
func (s *sweep) xWriter(d *config) bool {
	if s.writerX == 0 {
		s.writerX = 1
		if s.writerOf(d, s.ops[s.x].client) {
			s.writerX = 2
		}
	}
	return s.writerX == 2
}

// writerOf reports whether client (any client: -1) may take the write
// lock before the operation returning now: it has a running write acquire
// or a lost one left (then the readers may have to leave first).
func (s *sweep) writerOf(d *config, client int32) bool {
	for _, y := range s.inflight {
		if op := &s.ops[y]; (client < 0 || op.client == client) && op.kind == linAcquire && !op.shared && op.out == outOK && d.hasLin(y) < 0 {
			return true
		}
	}
	ids := s.lostAcqAll
	if client >= 0 {
		ids = s.lostAcqPools[client]
	}
	for _, id := range ids {
		if p := &s.pools[id]; !p.shared && s.avail(d, id) < int32(len(p.ops)) {
			return true
		}
	}
	return false
}
