package checker

import (
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
//     is held during its window. A configuration keeps a horizon, failedUpTo: the
//     running failed acquires invoked at or before failedUpTo are placed. While
//     the lock is held, failedUpTo follows the time of the last placement; when
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
//     the same whichever client wrote it (anonymous). Lost acquires whose
//     key is such and whose lease may have run out by the clock are
//     counted, not named (spent, sweep_spent.go), and a holder whose lease
//     may have run out dominates a free lock (expiredOverFree).
//   - A release refused as not-owner that returns where it changes
//     nothing but the clock is placed there at once; after moves, only
//     where it frees the lock (refusedCommutes).
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
	// OutOfTime says the sweep gave up (Exceeded) because its budget
	// (Options.SearchBudget, CPU time) ran out or the check was
	// cancelled, not for its bound.
	OutOfTime bool `json:"out_of_time,omitempty"`
	// OutOf says what stopped it when OutOfTime: "cpu-budget" (its budget
	// of CPU time, BudgetNs, ran out), "wall-ceiling" (wallCeiling times
	// the budget passed in wall time first: a machine that starved it),
	// "interrupted" (the check was cancelled); "wall-budget" where the
	// thread's CPU clock cannot be read and the budget counts wall time.
	OutOf string `json:"out_of,omitempty"`
	// BudgetNs is the sweep's CPU budget (Options.SearchBudget, or
	// provenBudget). CPUNs and WallNs are the CPU time it got and the wall
	// time it took, both passes and the window proofs together
	// (measurements, like Property.Millis; not in results.json, which
	// must not vary from one check of a history to the next but for ms).
	BudgetNs int64 `json:"budget_ns,omitempty"`
	CPUNs    int64 `json:"-"`
	WallNs   int64 `json:"-"`
	// Beam counts the configurations the first pass dropped to keep at
	// most its beam open (sweep_beam.go): a failure of that pass is then
	// confirmed by the exact pass.
	Beam int64 `json:"beam_cut,omitempty"`
}

// config is one way the lock may be after the operations read so far.
type config struct {
	s lockState
	// failedUpTo: the running failed acquires invoked at or before failedUpTo are
	// placed (lease: failedUpTo == s.now while held; no lease: Never while held,
	// the time the lock was freed while free).
	failedUpTo int64
	lin        []int32   // running definite operations placed early, sorted
	used       []poolUse // indeterminate operations used, by pool, sorted
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

func withLin(lin []int32, i int32) []int32 {
	return withLinInto(make([]int32, 0, len(lin)+1), lin, i)
}

// withLinInto is withLin appending to out.
func withLinInto(out, lin []int32, i int32) []int32 {
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

// sweep is the lock checker's state, grouped by concern: what it reads
// (the model, the operations), the running and lost operations, the
// configurations open, how it is restricted (the passes), the scratch of
// one return's exploration, and what it found.
type sweep struct {
	m     lockModel
	ops   []lockOp
	bound int
	t     int64          // the sweep's time: of the event being read
	win   *windowTracker // incremental: drops failed acquires at their return

	frontier, next []config // the configurations open, and being built

	sweepRunning
	sweepPools
	sweepPass
	sweepScratch
	sweepRWCache
	sweepResult
	sweepBeam
}

// sweepRunning is the definite operations running (invoked, not yet
// returned) at the sweep's time.
type sweepRunning struct {
	rets     retHeap // running definite operations, by return
	inflight []int32 // running definite operations but failed acquires
	// (read-write) the same by kind, for expand: releases, successful
	// write acquires, and by client how many of them run and how many
	// successful read acquires.
	runningReleases, runningWriters []int32
	runningOf, runningReadsOf       []int32
	heldIn                          []int32 // running failed acquires (lease: for moved free steps)
}

// sweepPools is the pools of lost (indeterminate) operations and their
// indexes (sweep_pools.go).
type sweepPools struct {
	pools        []pool
	lostAcqPools map[int32][]int32 // client -> pools of its lost acquires, by owner
	lostRelPools map[int32][]int32 // client -> pools of its lost releases
	// The pools of lost releases by client and owner (relPool): 1 + the
	// first pool naming an owner, by owner id; 1 + the pool of a client's
	// releases naming none, and of those naming owners no acquire carries
	// (orphanPool), by client; lostRelIndex for the others (negative
	// clients).
	relByOwner          []int32
	relNone, relOrphans []int32
	lostRelIndex        map[[2]int32]int32
	lostAcqAll          []int32 // every acquire pool
	// (read-write) the acquire pools of readers, and of writers
	lostReadPools, lostWritePools []int32
	lostReadPoolsOf               [][]int32 // (read-write) client -> the pools of its lost read acquires
	lostReadOwned                 []bool    // (read-write) client -> one of those pools names an owner
}

// sweepPass is how a pass restricts the model or prunes (runLockSweep).
type sweepPass struct {
	// capacity, when not 0, makes dominance approximate: pools with at
	// least capacity operations left compare as equal. A configuration
	// that survives is still a real linearization, but one pruned that
	// way might have been the only one to: a failure must be confirmed
	// without it.
	capacity int32
	// mergeOrphans: the lost releases of a client that name an owner no
	// acquire carries share one pool (they free the same locks); only
	// when every acquire is known in advance (not incremental).
	mergeOrphans bool
	look         *lookahead // nil when the rest of the history is unknown
	// horizon, when not 0, restricts the model: an indeterminate operation
	// takes effect no later than horizon after its client gave up on it. A
	// linearization found that way is one of the full model; a failure is
	// not a proof.
	horizon int64
	// halt, when set, is polled every haltEvery returns and explorations:
	// true makes the sweep give up (SearchStats.OutOfTime): its time
	// budget ran out, or the check was cancelled.
	halt  func() bool
	polls int
	// beam, when not 0, keeps at most beam configurations open after a
	// return (the first pass; sweep_beam.go): a failure is then not a
	// proof.
	beam int
}

// haltEvery is how many returns and explorations the sweep reads between
// two polls of its halt function (a poll reads the clock).
const haltEvery = 16

// halted polls s.halt every haltEvery calls and gives up when it says so.
func (s *sweep) halted() bool {
	if s.halt == nil {
		return false
	}
	if s.polls++; s.polls%haltEvery != 0 || !s.halt() {
		return false
	}
	s.stats.OutOfTime = true
	s.exceed()
	return true
}

// sweepScratch is the exploration of one return (expand) and its
// reusable buffers.
type sweepScratch struct {
	work, seen []config
	buf, buf2  []lockState
	calls      []int64
	keep       []bool
	order      []int32
	expiredIdx []int32 // prune: the configurations whose holder's lease may have run out
	deferred   []int32 // expand: running no-op operations of the node explored
	deferDone  []bool
	bufNoop    []lockState
	bufReach   []lockState
	cur        *config // expand: the node explored
	x          int32   // expand: the returning operation
	node       config
	nest       bool // poolMoves: nested lost acquires are worth trying
	// changesOnly (expand): the returning operation was placed in the
	// configuration explored, where it changes nothing but the clock; it
	// is placed after moves only where it changes the state.
	changesOnly bool
	anonDone    bool // poolMoves (approximate): an anonymous lock was tried
	// emit: a move's placed operations or pool uses, built here and
	// copied only when the move is explored.
	linBuf []int32
	useBuf []poolUse
}

// sweepRWCache is what a read-write sweep remembers within one return's
// exploration, and its reader sets' compaction.
type sweepRWCache struct {
	reach      bool // prune (read-write): dominance may place moves (reaches)
	writerFits bool // expand (read-write): writerMayGo of the node explored
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
}

// sweepResult is what the sweep found.
type sweepResult struct {
	stats  SearchStats
	rules  ruleCounts
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
		m:     m,
		bound: bound,
	}
	s.compactAt, s.minCompact = minCompact, minCompact
	s.lostAcqPools = map[int32][]int32{}
	s.lostRelPools = map[int32][]int32{}
	s.lostRelIndex = map[[2]int32]int32{}
	s.blocker = -1
	s.frontier = []config{{failedUpTo: -history.Never, grant: -1, freed: -1}}
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
		s.runningReleases = append(s.runningReleases, i)
	case op.kind == linRelease:
		s.runningReleases = remove(s.runningReleases, i)
	case !op.shared && by > 0:
		s.runningWriters = append(s.runningWriters, i)
	case !op.shared:
		s.runningWriters = remove(s.runningWriters, i)
	}
	if c := int(op.client); c >= 0 {
		s.runningOf, s.runningReadsOf = grown(s.runningOf, c), grown(s.runningReadsOf, c)
		s.runningOf[c] += by
		if op.kind == linAcquire && op.shared {
			s.runningReadsOf[c] += by
		}
	}
}

// grown returns xs long enough to index i (>= 0), zero values added.
func grown[T any](xs []T, i int) []T {
	if i < len(xs) {
		return xs
	}
	return append(xs, make([]T, i+1-len(xs))...)
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
	if s.halted() {
		return
	}
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
		if op.out == outHeld && op.call <= c.failedUpTo {
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
			if s.refusedCommutes(c, op) {
				// A refused release that changes nothing in c but the
				// clock: placed at once, and after moves only where it
				// frees the lock (changesOnly).
				s.emit(c, i, -1, true, s.buf[0], s.buf[0].now)
				s.rules.refusedAtOnce++
				s.changesOnly = true
				s.expand(c, i)
				s.changesOnly = false
				if s.stats.Exceeded {
					return
				}
				continue
			}
		}
		s.expand(c, i)
		if s.stats.Exceeded {
			return
		}
	}
	s.preCut()
	s.prune()
	s.cutBeam()
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
	s.checkpointed()
}

func (s *sweep) exceed() {
	s.stats.Exceeded = true
	s.stats.ExceededAt = s.t
}
