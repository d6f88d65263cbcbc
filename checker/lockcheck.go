package checker

import (
	"slices"
	"sort"

	"github.com/locktest/locktest/history"
)

// The lock sweep: a linearizability checker made for locks.
//
// General linearizability checking is NP-complete, and porcupine's search
// gives up on the histories faults produce (many clients, lost answers, a
// violation to prove). A lock is a very specific object, and the sweep
// exploits it. It walks the history in time order, one invocation or
// return at a time (invocations first at equal times: intervals are
// closed), keeping the set of configurations the lock can be in: the
// model's state (who holds it, since when, how deep, the time of the last
// linearization point) plus which running operations were already placed
// and which indeterminate ones were used. At each return it places the
// returning operation in every configuration, allowing any sequence of
// running or indeterminate operations to go first ("just in time"
// linearization); a configuration in which it cannot be placed dies, and
// when none is left the history is not linearizable and the returning
// operation is the first that cannot be placed. The same step function
// (lockModel.step) decides every move, so the sweep is exact: it agrees
// with porcupine wherever porcupine finishes.
//
// What keeps the set small is the structure of a lock:
//
//   - Failed ("held") acquires change nothing; one is placed when the lock
//     is held during its window. A configuration keeps a horizon, tau: the
//     running failed acquires invoked at or before tau are placed. While
//     the lock is held, tau follows the time of the last placement; when
//     the lock is freed they are placed just before, and (lease) the free
//     step may be moved later to the invocation of a running failed
//     acquire, one alternative per distinct invocation. Those inside a held
//     window (windows.go) are dropped before the sweep.
//   - Other running operations that change nothing where they stand (a
//     release refused as not-owner by a client that does not hold the
//     lock) are placed as late as possible: just before a step that would
//     change what they do, or at their own return (expand, placeDeferred).
//   - Indeterminate operations never return: they wait in pools, one per
//     client and owner, and those of a pool are interchangeable but for
//     their invocation, so a configuration only counts how many of each
//     pool it used, oldest first.
//   - Configurations are compared by dominance, not just equality: with
//     the same holder, placed operations (or fewer, the others placeable
//     at no cost) and (at most the same) pools used, the one with the
//     earlier clock, the later horizon and the more lenient lease (earlier
//     possible expiry, later possible refresh) can do all the other can.
//     With the whole history known (lookahead), a lease's deadline only
//     matters while a successful release that could match is still to
//     come, and a lost acquire's key that no release can free any more is
//     the same whichever client wrote it (anonymous).
//
// In most of a history one configuration is left after every return: the
// sweep is then a replay. Where several stay open (around lost answers,
// concurrent grants, expired leases) it searches, bounded by
// Options.SearchBound configurations; beyond the bound it gives up and
// says where (the property falls back to porcupine).

// SearchStats says how the lock sweep decided a history: how much of it
// was decided with one configuration open and how much it searched.
type SearchStats struct {
	// Ops is the number of lock operations the sweep read: acquires and
	// releases, less those failed for an error, less the failed acquires
	// inside a held window (Dropped), which are placeable anywhere.
	Ops     int `json:"ops"`
	Dropped int `json:"dropped"`
	// Indeterminate is how many of Ops never returned: they wait in pools.
	Indeterminate int `json:"indeterminate"`
	// Forced counts the returns with exactly one configuration open before
	// and after (the operation had one way to be placed that mattered);
	// Searched the others. Forced + Searched is the number of returns read.
	Forced   int `json:"forced"`
	Searched int `json:"searched"`
	// Windows is the number of stretches of the history during which more
	// than one configuration stayed open; MaxFrontier the most at once.
	Windows     int `json:"windows"`
	MaxFrontier int `json:"max_frontier"`
	// Explored counts the configurations the sweep built in all.
	Explored int64 `json:"explored"`
	// Approx counts the configurations the first, restricted pass set
	// aside (see runLockSweep); Restricted the uses of lost operations it
	// refused past their horizon. Exact says the verdict came from the
	// exact pass.
	Approx     int64 `json:"approx,omitempty"`
	Restricted int64 `json:"restricted,omitempty"`
	Exact      bool  `json:"exact_pass,omitempty"`
	// Bound is the search bound: the most configurations open at once (a
	// quarter of it explored at one return). Exceeded says the sweep gave
	// up at time ExceededAt.
	Bound      int   `json:"bound"`
	Exceeded   bool  `json:"exceeded,omitempty"`
	ExceededAt int64 `json:"exceeded_at_ns,omitempty"`
}

// poolUse is how many operations of a pool a configuration used.
type poolUse struct{ pool, n int32 }

// config is one way the lock may be after the operations read so far.
type config struct {
	s lockState
	// tau: the running failed acquires invoked at or before tau are
	// placed (lease: tau == s.now while held; no lease: Never while held,
	// the time the lock was freed while free).
	tau  int64
	lin  []int32   // running definite operations placed early, sorted
	used []poolUse // indeterminate operations used, by pool, sorted
	// Provenance, for explanations: the operation that granted the
	// current holder's tenure and the one that last freed the lock, -1
	// when none.
	grant, freed int32
	// lost: the last move was a lost operation that took the lock (within
	// one return's exploration; see poolMoves).
	lost bool
}

func (c *config) hasLin(i int32) int {
	for k, j := range c.lin {
		if j == i {
			return k
		}
		if j > i {
			break
		}
	}
	return -1
}

func (c *config) usedOf(pool int32) int32 {
	for _, u := range c.used {
		if u.pool == pool {
			return u.n
		}
	}
	return 0
}

// avail is the position in pool p of the next operation c may use: past
// those it used and (with a horizon) those expired.
func (s *sweep) avail(c *config, p int32) int32 {
	pl := &s.pools[p]
	n := int32(len(pl.ops))
	if s.horizon == 0 {
		return min(c.usedOf(p), n)
	}
	s.expire(pl)
	u := max(c.usedOf(p), pl.live)
	for u < n && s.expiredOp(pl.ops[u]) {
		u++
		s.stats.Restricted++
	}
	return u
}

// expire moves pl.live past the operations of pool pl that expired.
func (s *sweep) expire(pl *pool) {
	for pl.live < int32(len(pl.ops)) && s.expiredOp(pl.ops[pl.live]) {
		pl.live++
		s.stats.Restricted++
	}
}

// expiredOp reports whether indeterminate operation i can no longer take
// effect (restricted model, horizon).
func (s *sweep) expiredOp(i int32) bool {
	return s.horizon > 0 && satAdd(s.ops[i].done, s.horizon) < s.t
}

func withLin(lin []int32, i int32) []int32 {
	out := make([]int32, 0, len(lin)+1)
	k := 0
	for k < len(lin) && lin[k] < i {
		k++
	}
	out = append(out, lin[:k]...)
	out = append(out, i)
	return append(out, lin[k:]...)
}

func withoutLin(lin []int32, k int) []int32 {
	if len(lin) == 1 {
		return nil
	}
	out := make([]int32, 0, len(lin)-1)
	out = append(out, lin[:k]...)
	return append(out, lin[k+1:]...)
}

// compact drops from used (in place) the pools whose count no longer
// matters: with a horizon, those whose used operations all expired.
func (s *sweep) compact(used []poolUse) []poolUse {
	if s.horizon == 0 {
		return used
	}
	out := used[:0]
	for _, u := range used {
		// (A pool's live moves only when asked: ask, or a configuration
		// would carry every pool it ever used.)
		if s.expire(&s.pools[u.pool]); u.n > s.pools[u.pool].live {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func usedTotal(used []poolUse) int32 {
	n := int32(0)
	for _, u := range used {
		n += u.n
	}
	return n
}

// withUseAt returns used with pool's count set to n.
func withUseAt(used []poolUse, pool, n int32) []poolUse {
	out := make([]poolUse, 0, len(used)+1)
	done := false
	for _, u := range used {
		switch {
		case u.pool == pool:
			u.n = n
			done = true
		case u.pool > pool && !done:
			out = append(out, poolUse{pool, n})
			done = true
		}
		out = append(out, u)
	}
	if !done {
		out = append(out, poolUse{pool, n})
	}
	return out
}

// usedLE reports whether configuration a has, pool by pool, at least the
// operations left that b has: it used no more of them, counting expired
// ones as used (horizon), or (capacity, approximate) it has at least
// capacity left.
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
		return false
	}
	return true
}

// dominates reports whether configuration a can do all that b can (or,
// with s.capacity, all but using more than capacity of a pool b has left).
func (s *sweep) dominates(a, b *config) bool {
	m := s.m
	if a.s.client != b.s.client || a.s.owner != b.s.owner || a.s.depth != b.s.depth || a.s.readers != b.s.readers ||
		(!slices.Equal(a.lin, b.lin) && !s.linCovers(a, b)) || (s.reach && !s.usedLE(a, b)) {
		return s.reach && s.reaches(a, b)
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
	held := a.s.held()
	if m.lease {
		if a.s.now > b.s.now {
			return false
		}
		if held {
			// An earlier possible expiry and a later possible refresh
			// only allow more; the refresh only matters to a successful
			// release of that holder still to come.
			return a.s.acqCall <= b.s.acqCall && (a.s.acqRet >= b.s.acqRet || !s.deadlineMatters(b.s))
		}
	}
	return held || a.tau >= b.tau
}

// lookahead is what the sweep knows of the rest of the history when it
// has all of it (not incremental): each client's successful releases, and
// which clients ever lose a release that names no known owner.
type lookahead struct {
	rels     map[int32][]int32 // client -> its successful releases (indices), by invocation
	sorted   map[int32]bool    // whether those also come by return
	refused  map[int32][]int32 // client -> its releases that failed "not-owner"
	orphanIR map[int32]bool    // client -> it has a lost release naming no known owner
}

func newLookahead(ops []lockOp, ow *owners) *lookahead {
	la := &lookahead{rels: map[int32][]int32{}, sorted: map[int32]bool{}, refused: map[int32][]int32{}, orphanIR: map[int32]bool{}}
	for k := range ops {
		op := &ops[k]
		if op.kind != linRelease {
			continue
		}
		if op.out == outUnknown && !ow.isKnown(op.owner) {
			la.orphanIR[op.client] = true
		}
		if op.out == outNotOwner {
			la.refused[op.client] = append(la.refused[op.client], int32(k))
		}
		if op.out != outOK {
			continue
		}
		rs := la.rels[op.client]
		if len(rs) == 0 {
			la.sorted[op.client] = true
		} else if ops[rs[len(rs)-1]].ret > op.ret {
			la.sorted[op.client] = false
		}
		la.rels[op.client] = append(rs, int32(k))
	}
	return la
}

// releaseAhead reports whether a successful release that can free held
// state st (same client, matching owner) may still be placed (it returns
// now or later) at a point no later than dl.
func (s *sweep) releaseAhead(st lockState, dl int64) bool {
	la := s.look
	if la == nil {
		return true
	}
	rs := la.rels[st.client]
	k := 0
	if la.sorted[st.client] {
		k = sort.Search(len(rs), func(k int) bool { return s.ops[rs[k]].ret >= s.t })
	}
	for ; k < len(rs); k++ {
		r := &s.ops[rs[k]]
		if r.ret < s.t {
			continue // placed already
		}
		if r.call > dl {
			if la.sorted[st.client] {
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

// orphanPool is the owner of the pool of a client's lost releases naming
// owners no acquire carries.
const orphanPool int32 = -2

// pool holds the indeterminate acquires or releases of one client and
// owner (and mode: read-write locks), in order of invocation.
type pool struct {
	kind   linKind
	client int32
	owner  int32
	shared bool
	ops    []int32
	live   int32 // with a horizon: the operations before live expired
	// sameOwner (lost releases): 1 + the next pool naming the same owner,
	// of another client (0: none).
	sameOwner int32
}

// sweep is the lock checker's state.
type sweep struct {
	m     lockModel
	ops   []lockOp
	bound int

	rets     retHeap // running definite operations, by return
	inflight []int32 // running definite operations but failed acquires
	// (read-write) the same by kind, for expand: releases, successful
	// write acquires, and by client how many of them run and how many
	// successful read acquires.
	infRel, infW     []int32
	infOf, infReadOf []int32
	heldIn           []int32 // running failed acquires (lease: for moved free steps)

	pools   []pool
	iaPools map[int32][]int32 // client -> pools of its indeterminate acquires, by owner
	irPools map[int32][]int32 // client -> pools of its indeterminate releases
	// The pools of indeterminate releases by client and owner (relPool):
	// 1 + the first pool naming an owner, by owner id; 1 + the pool of a
	// client's releases naming none, and of those naming owners no
	// acquire carries (orphanPool), by client; irIndex for the others
	// (negative clients).
	relByOwner          []int32
	relNone, relOrphans []int32
	irIndex             map[[2]int32]int32
	iaIDs               []int32 // every acquire pool
	// (read-write) the acquire pools of readers, and of writers
	iaRead, iaWrite []int32
	iaReadOf        [][]int32 // (read-write) client -> the pools of its lost read acquires
	iaReadOwned     []bool    // (read-write) client -> one of those pools names an owner

	frontier, next []config
	work, seen     []config
	buf, buf2      []lockState
	calls          []int64
	keep           []bool
	order          []int32
	deferred       []int32 // expand: running no-op operations of the node explored
	deferDone      []bool
	bufNoop        []lockState
	bufReach       []lockState
	reach          bool // prune (read-write): dominance may place moves (reaches)
	writerFits     bool // expand (read-write): writerMayGo of the node explored
	// read-write: the size of the reader sets' table that makes ret
	// compact it, and the least it is set to (tests lower it).
	compactAt, minCompact int
	relOpen               []bool  // expand (read-write): by client, a running release not placed in the node
	relClients            []int32 // expand (read-write): those clients
	relFresh              []bool  // expand (read-write): by client, one of them may free a lost reader naming no owner
	// expand (read-write): anyWriter and xWriter of the node explored (0:
	// not computed yet, 1 false, 2 true).
	writerAny, writerX int8
	// mayExpire: whether a reader of set expiredOf may have expired by
	// expiredAt (the last asked).
	expiredOf int32
	expiredAt int64
	expired   bool
	// deadlinePassed: the same for sure expiries.
	passedOf int32
	passedAt int64
	passed   bool
	cur      *config // expand: the node explored
	x        int32   // expand: the returning operation
	node     config

	// capacity, when not 0, makes dominance approximate: pools with at
	// least capacity operations left compare as equal. A configuration
	// that survives is still a real linearization, but one pruned that
	// way might have been the only one to: a failure must be confirmed
	// without it.
	capacity int32
	nest     bool // poolMoves: nested lost acquires are worth trying
	// mergeOrphans: the lost releases of a client that name an owner no
	// acquire carries share one pool (they free the same locks); only
	// when every acquire is known in advance (not incremental).
	mergeOrphans bool
	look         *lookahead // nil when the rest of the history is unknown
	anonDone     bool       // poolMoves (approximate): an anonymous lock was tried
	// horizon, when not 0, restricts the model: an indeterminate operation
	// takes effect no later than horizon after its client gave up on it. A
	// linearization found that way is one of the full model; a failure is
	// not a proof.
	horizon int64

	t   int64          // the sweep's time: of the event being read
	win *windowTracker // incremental: drops failed acquires at their return

	stats  SearchStats
	wide   bool // more than one configuration open
	failed bool
	// blocker is the operation that could not be placed, before the
	// configurations in which it could not.
	blocker int32
	before  []config
}

func newSweep(m lockModel, bound int) *sweep {
	if m.rw {
		// Its own reader sets, which it compacts (compactSets).
		m.rs = newReaderSets()
		m.rs.owned = true
	}
	s := &sweep{
		compactAt:  minCompact,
		minCompact: minCompact,
		m:          m,
		bound:      bound,
		iaPools:    map[int32][]int32{},
		irPools:    map[int32][]int32{},
		irIndex:    map[[2]int32]int32{},
		blocker:    -1,
	}
	s.frontier = []config{{tau: -history.Never, grant: -1, freed: -1}}
	s.rets.ops = &s.ops
	s.stats.Bound = bound
	return s
}

// stopped reports whether the sweep can read no further: it found the
// first operation that cannot be placed, or exceeded its bound.
func (s *sweep) stopped() bool { return s.failed || s.stats.Exceeded }

// add appends op and reads its invocation (after the returns before it).
// The operation is kept even when the sweep stops first, so that a sweep
// started afresh over s.ops sees it.
func (s *sweep) add(op lockOp) {
	i := int32(len(s.ops))
	s.ops = append(s.ops, op)
	if s.stopped() {
		return
	}
	s.advance(op.call)
	if s.stopped() {
		return
	}
	s.call(i)
	if op.ret != history.Never {
		s.rets.push(i)
	}
}

// advance reads the returns before t.
func (s *sweep) advance(t int64) {
	for s.rets.len() > 0 && s.ops[s.rets.min()].ret < t && !s.stopped() {
		s.ret(s.rets.pop())
	}
}

// finish reads the remaining returns and reports whether the history is
// linearizable (meaningless when the bound was exceeded).
func (s *sweep) finish() bool {
	s.advance(history.Never)
	return !s.stopped()
}

func (s *sweep) call(i int32) {
	op := &s.ops[i]
	s.t = op.call
	s.stats.Ops++
	if s.win != nil {
		s.win.call(op)
	}
	if op.ret == history.Never {
		s.stats.Indeterminate++
		s.addToPool(i)
		return
	}
	if op.out == outHeld {
		if s.m.lease {
			s.heldIn = append(s.heldIn, i)
		}
		return
	}
	s.inflight = append(s.inflight, i)
	if s.m.rw {
		s.running(op, i, 1)
	}
}

// running notes (read-write locks) that definite operation op, i, starts
// (by 1) or stops (by -1) running.
func (s *sweep) running(op *lockOp, i int32, by int32) {
	switch {
	case op.kind == linRelease && by > 0:
		s.infRel = append(s.infRel, i)
	case op.kind == linRelease:
		s.infRel = remove(s.infRel, i)
	case !op.shared && by > 0:
		s.infW = append(s.infW, i)
	case !op.shared:
		s.infW = remove(s.infW, i)
	}
	if c := int(op.client); c >= 0 {
		s.infOf, s.infReadOf = grown(s.infOf, c), grown(s.infReadOf, c)
		s.infOf[c] += by
		if op.kind == linAcquire && op.shared {
			s.infReadOf[c] += by
		}
	}
}

func (s *sweep) addToPool(i int32) {
	op := &s.ops[i]
	if op.kind == linAcquire {
		// Lost acquires of one client and owner are interchangeable but
		// for their invocation.
		for _, id := range s.iaPools[op.client] {
			if s.pools[id].owner == op.owner && s.pools[id].shared == op.shared {
				s.pools[id].ops = append(s.pools[id].ops, i)
				return
			}
		}
		id := int32(len(s.pools))
		s.pools = append(s.pools, pool{kind: linAcquire, client: op.client, owner: op.owner, shared: op.shared, ops: []int32{i}})
		s.iaPools[op.client] = append(s.iaPools[op.client], id)
		s.iaIDs = append(s.iaIDs, id)
		if op.shared {
			s.iaRead = append(s.iaRead, id)
			if c := int(op.client); c >= 0 {
				s.iaReadOf = grown(s.iaReadOf, c)
				s.iaReadOf[c] = append(s.iaReadOf[c], id)
				if op.owner != 0 {
					s.iaReadOwned = grown(s.iaReadOwned, c)
					s.iaReadOwned[c] = true
				}
			}
		} else {
			s.iaWrite = append(s.iaWrite, id)
		}
		return
	}
	key := op.owner
	if s.mergeOrphans && !s.m.reentrant && key > 0 && !s.m.ow.isKnown(key) {
		key = orphanPool
	}
	if id := s.relPool(op.client, key); id >= 0 {
		s.pools[id].ops = append(s.pools[id].ops, i)
		return
	}
	id := int32(len(s.pools))
	s.pools = append(s.pools, pool{kind: linRelease, client: op.client, owner: key, ops: []int32{i}})
	s.irPools[op.client] = append(s.irPools[op.client], id)
	switch {
	case key > 0:
		s.relByOwner = grown(s.relByOwner, int(key))
		s.pools[id].sameOwner = s.relByOwner[key]
		s.relByOwner[key] = id + 1
	case op.client >= 0:
		t := s.relOfClient(key)
		*t = grown(*t, int(op.client))
		(*t)[op.client] = id + 1
	default:
		s.irIndex[[2]int32{op.client, key}] = id
	}
}

// relPool returns the pool of client's lost releases naming owner key (0:
// none, orphanPool: owners no acquire carries), -1 when there is none.
func (s *sweep) relPool(client, key int32) int32 {
	switch {
	case key > 0:
		if int(key) < len(s.relByOwner) {
			for id := s.relByOwner[key] - 1; id >= 0; id = s.pools[id].sameOwner - 1 {
				if s.pools[id].client == client {
					return id
				}
			}
		}
		return -1
	case client >= 0:
		if t := *s.relOfClient(key); int(client) < len(t) {
			return t[client] - 1
		}
		return -1
	}
	if id, ok := s.irIndex[[2]int32{client, key}]; ok {
		return id
	}
	return -1
}

// relOfClient is the table, by client, of the pools of lost releases
// naming key: none (0) or owners no acquire carries (orphanPool).
func (s *sweep) relOfClient(key int32) *[]int32 {
	if key == orphanPool {
		return &s.relOrphans
	}
	return &s.relNone
}

// grown returns xs long enough to index i (>= 0), zero values added.
func grown[T any](xs []T, i int) []T {
	if i < len(xs) {
		return xs
	}
	return append(xs, make([]T, i+1-len(xs))...)
}

// freeing calls f with each pool of client's lost releases that may free
// a hold of client with owner (ownsHold): the pool of that owner and that
// of releases naming none, or (an unknown owner) the pool of owners no
// acquire carries. A client loses a release per hold at most, so its
// pools grow with the history: looking them all up would make the sweep
// quadratic. f returns false to stop; freeing returns false if it did.
func (s *sweep) freeing(client, owner int32, f func(id int32) bool) bool {
	var keys [2]int32
	switch {
	case owner > 0:
		keys = [2]int32{owner, 0}
	case owner == ownerFresh && s.mergeOrphans && !s.m.reentrant:
		keys = [2]int32{orphanPool, 0}
	default:
		for _, id := range s.irPools[client] {
			if !f(id) {
				return false
			}
		}
		return true
	}
	for _, k := range keys {
		if id := s.relPool(client, k); id >= 0 && !f(id) {
			return false
		}
	}
	return true
}

func remove(xs []int32, i int32) []int32 {
	for k, x := range xs {
		if x == i {
			xs[k] = xs[len(xs)-1]
			return xs[:len(xs)-1]
		}
	}
	return xs
}

// ret reads the return of definite operation i: it is placed in every
// configuration, or the history is not linearizable.
func (s *sweep) ret(i int32) {
	op := &s.ops[i]
	s.t = op.ret
	if op.out == outHeld {
		if s.m.lease {
			s.heldIn = remove(s.heldIn, i)
		}
		if s.win != nil && s.win.covers(op.call, op.ret) {
			s.stats.Dropped++
			s.stats.Ops--
			return
		}
	} else {
		s.inflight = remove(s.inflight, i)
		if s.m.rw {
			s.running(op, i, -1)
		}
	}
	if s.win != nil {
		s.win.ret(op)
	}

	s.next = s.next[:0]
	forced := len(s.frontier) == 1
	for fi := range s.frontier {
		c := &s.frontier[fi]
		if k := c.hasLin(i); k >= 0 {
			nc := *c
			nc.lin = withoutLin(c.lin, k)
			s.next = append(s.next, nc)
			continue
		}
		if op.out == outHeld && op.call <= c.tau {
			s.next = append(s.next, *c)
			continue
		}
		if op.out == outHeld && c.s.held() && s.heldCommutes(c) {
			// Held: the failed acquire only moves the clock. Every move
			// that could go first can go after it to the same effect
			// (heldCommutes), so this is the one placement to keep.
			ns := s.m.at(c.s, op.call)
			s.emit(c, i, -1, true, ns, ns.now)
			continue
		}
		// An operation that changes nothing in c commutes with every
		// move: place it and move on. (A successful one always changes a
		// read-write lock: no need to build its states, and their reader
		// sets, to see it.)
		if !s.m.rw || op.out != outOK {
			s.buf = s.m.stepInto(s.buf[:0], c.s, op, op.out)
			if len(s.buf) == 1 && s.buf[0] == c.s {
				s.next = append(s.next, *c)
				continue
			}
		}
		s.expand(c, i)
		if s.stats.Exceeded {
			return
		}
	}
	s.prune()
	if forced && len(s.next) == 1 {
		s.stats.Forced++
	} else {
		s.stats.Searched++
	}
	if len(s.next) == 0 {
		s.failed = true
		s.blocker = i
		s.before = append([]config(nil), s.frontier...)
		return
	}
	s.frontier, s.next = s.next, s.frontier
	if s.m.rw && s.m.rs.size() > s.compactAt {
		s.compactSets()
	}
	n := len(s.frontier)
	s.stats.MaxFrontier = max(s.stats.MaxFrontier, n)
	if n > 1 && !s.wide {
		s.stats.Windows++
	}
	s.wide = n > 1
	if n > s.bound {
		s.exceed()
	}
}

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

func (s *sweep) exceed() {
	s.stats.Exceeded = true
	s.stats.ExceededAt = s.t
}

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
		s.deferred, s.deferDone = s.deferred[:0], s.deferDone[:0]
		// (Read-write: only a refused release can change nothing; see
		// noop.)
		deferrable := s.inflight
		if s.m.rw {
			deferrable = s.infRel
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
// its invocation at most), whether every sequence of moves that could go
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
		na.tau = st.now
	case st.held():
		na.tau = history.Never
	case a.s.held() && s.m.lease:
		na.tau = st.now
	case a.s.held():
		na.tau = s.t
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
			nd.tau = nd.s.now
		}
		nd.lin = withLin(d.lin, y)
		// Not s.push: d itself dominates nd (it can place y at no cost),
		// but it is deferring y, so nd must be explored.
		s.seen = append(s.seen, nd)
		s.work = append(s.work, nd)
	}
}

// push adds nd to the exploration unless a configuration seen dominates it.
func (s *sweep) push(nd config) {
	for k := range s.seen {
		if s.dominates(&s.seen[k], &nd) {
			return
		}
	}
	s.seen = append(s.seen, nd)
	s.work = append(s.work, nd)
}

// poolMoves tries the indeterminate operations that can change d, x
// being the returning operation.
//
// A lost acquire that nests on its client's hold (reentrant) only deepens
// it and refreshes the lease at its point: nesting later is never worse, so
// it is tried only when a release of that client is still to be placed
// (x, or a running one), the only operations the depth matters to.
func (s *sweep) poolMoves(d *config, x int32) {
	if d.lost && !s.m.rw {
		// The lock was just taken by a lost acquire: another lost
		// operation now would only undo or replace that (take over its
		// expired lease, release it, nest on it), which using that
		// operation instead from before does at least as well. (Not on
		// a read-write lock: a lost reader may join another, and one
		// that takes over a lost writer's expired lease may get a reader
		// of its own where from before it would only have nested on its
		// client's reader.)
		return
	}
	st := d.s
	s.nest = false
	if s.m.reentrant && st.held() {
		if o := &s.ops[x]; o.kind == linRelease && o.client == st.client {
			s.nest = true
		}
		for _, y := range s.inflight {
			if o := &s.ops[y]; o.kind == linRelease && o.client == st.client && d.hasLin(y) < 0 {
				s.nest = true
			}
		}
	}
	s.anonDone = false
	tryIA := func(id int32) {
		if p, u := &s.pools[id], s.avail(d, id); u < int32(len(p.ops)) {
			s.apply(d, p.ops[u], id, false)
		}
	}
	if !st.held() {
		if s.m.rw {
			s.lostAcquires(d, true, tryIA)
			return
		}
		for _, id := range s.iaIDs {
			tryIA(id)
		}
		return
	}
	if s.m.rw {
		s.poolMovesRW(d, tryIA)
		return
	}
	s.freeing(st.client, st.owner, func(id int32) bool {
		p := &s.pools[id]
		if u := s.avail(d, id); u < int32(len(p.ops)) && s.m.owns(st, &s.ops[p.ops[u]]) {
			s.apply(d, p.ops[u], id, false)
		}
		return true
	})
	if s.m.lease && s.m.expiry(st) <= s.t {
		// The lease may have run out: anybody's lost acquire may take it.
		for _, id := range s.iaIDs {
			tryIA(id)
		}
	} else if s.nest {
		for _, id := range s.iaPools[st.client] {
			tryIA(id)
		}
	}
	s.nest = false
}

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

// lostAcquires calls try with the pools of lost acquires worth trying in
// d (read-write locks), without building their states: the writers' when
// writers may take the lock, and the readers' but those that can only wait
// (rwDeferrable: not reentrant, no writer holds, no failed acquire returns
// on a free lock, and no release of its client may free it), found through
// the clients with a release rather than by asking every pool.
func (s *sweep) lostAcquires(d *config, writers bool, try func(int32)) {
	if writers {
		for _, id := range s.iaWrite {
			try(id)
		}
	}
	x := &s.ops[s.x]
	if s.m.reentrant || d.s.client != 0 || (x.out == outHeld && !d.s.held()) {
		for _, id := range s.iaRead {
			try(id)
		}
		return
	}
	readersOf := func(c int32) {
		if c < 0 || int(c) >= len(s.iaReadOf) {
			for _, id := range s.iaPools[c] {
				if s.pools[id].shared {
					try(id)
				}
			}
			return
		}
		for _, id := range s.iaReadOf[c] {
			try(id)
		}
	}
	for _, c := range s.relClients {
		if s.freesLostReader(c) {
			readersOf(c)
		}
	}
	if x.kind == linRelease && !s.releasing(x.client) {
		readersOf(x.client)
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
	for _, y := range s.infW {
		try(y)
	}
	mine := xc < 0 || int(xc) >= len(s.infOf) || s.infOf[xc] > 0
	if mine {
		for _, y := range s.inflight {
			if op := &s.ops[y]; op.client == xc && !(op.kind == linAcquire && !op.shared) {
				try(y)
			}
		}
	}
	for _, c := range s.relClients {
		if c == xc || (c >= 0 && int(c) < len(s.infReadOf) && s.infReadOf[c] == 0) {
			continue
		}
		for _, y := range s.inflight {
			if op := &s.ops[y]; op.client == c && op.kind == linAcquire && op.shared {
				try(y)
			}
		}
	}
	if s.m.lease && !s.m.renews && s.deadlinePassed(d.s) {
		for _, y := range s.infRel {
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
	for _, id := range s.iaIDs {
		p := &s.pools[id]
		if u := s.avail(d, id); !p.shared && u < int32(len(p.ops)) && blocks(&s.ops[p.ops[u]]) {
			return true
		}
	}
	return false
}

// lostRelease reports whether client has a lost release left for d that
// may free its hold with owner.
func (s *sweep) lostRelease(d *config, client, owner int32) bool {
	return !s.freeing(client, owner, func(id int32) bool { return s.avail(d, id) >= int32(len(s.pools[id].ops)) })
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
	if s.relFresh[c] || (int(c) < len(s.iaReadOwned) && s.iaReadOwned[c]) {
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
	for _, y := range s.infRel {
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
	ids := s.iaIDs
	if client >= 0 {
		ids = s.iaPools[client]
	}
	for _, id := range ids {
		if p := &s.pools[id]; !p.shared && s.avail(d, id) < int32(len(p.ops)) {
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
		if v := s.ops[j].call; v > p && v > d.tau {
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
	nd := config{s: ns, tau: d.tau, lin: d.lin, used: d.used, grant: d.grant, freed: d.freed}
	wasHeld, isHeld := d.s.held(), ns.held()
	switch {
	case isHeld && s.m.lease:
		nd.tau = ns.now
	case isHeld:
		nd.tau = history.Never
	case wasHeld && s.m.lease:
		nd.tau = placed
	case wasHeld:
		nd.tau = s.t
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
	if pool >= 0 {
		nd.used = s.compact(withUseAt(d.used, pool, s.avail(d, pool)+1))
	} else {
		nd.lin = withLin(d.lin, y)
	}
	s.push(nd)
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
	out := s.next[:0]
	for i := range s.next {
		if s.keep[i] {
			out = append(out, s.next[i])
		}
	}
	s.next = out
}

// rwPruneAll is the most configurations that prune compares all with all
// (read-write locks, whose dominance may place moves: see reaches);
// beyond it, only those with the same holder, without moves.
const rwPruneAll = 64

// retHeap is a min-heap of operations by return time.
type retHeap struct {
	ops *[]lockOp
	h   []int32
}

func (r *retHeap) len() int        { return len(r.h) }
func (r *retHeap) min() int32      { return r.h[0] }
func (r *retHeap) key(i int) int64 { return (*r.ops)[r.h[i]].ret }

func (r *retHeap) push(i int32) {
	r.h = append(r.h, i)
	k := len(r.h) - 1
	for k > 0 {
		p := (k - 1) / 2
		if r.key(p) <= r.key(k) {
			break
		}
		r.h[p], r.h[k] = r.h[k], r.h[p]
		k = p
	}
}

func (r *retHeap) pop() int32 {
	top := r.h[0]
	n := len(r.h) - 1
	r.h[0] = r.h[n]
	r.h = r.h[:n]
	k := 0
	for {
		l := 2*k + 1
		if l >= n {
			break
		}
		m := l
		if l+1 < n && r.key(l+1) < r.key(l) {
			m = l + 1
		}
		if r.key(k) <= r.key(m) {
			break
		}
		r.h[k], r.h[m] = r.h[m], r.h[k]
		k = m
	}
	return top
}
