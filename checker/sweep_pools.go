package checker

// The lock sweep's lost-operation pools: indeterminate acquires and
// releases wait in pools by client and owner, and a configuration counts
// how many of each pool it used (see lockcheck.go).

// poolUse is how many operations of a pool a configuration used.
type poolUse struct{ pool, n int32 }

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
	return withUseAtInto(make([]poolUse, 0, len(used)+1), used, pool, n)
}

// withUseAtInto is withUseAt appending to out.
func withUseAtInto(out, used []poolUse, pool, n int32) []poolUse {
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
	// phantom (lost acquires naming no owner): no release can free the key
	// of one any more (phantomClient); notPhantomAt: the sweep's time when
	// it was last found not to be.
	phantom      bool
	notPhantomAt int64
	// spent's memo: spentN of the pool's first spentLen operations are
	// spent at clock spentT (the prefix whose lease may have run out).
	spentT           int64
	spentLen, spentN int32
}

func (s *sweep) addToPool(i int32) {
	op := &s.ops[i]
	if op.kind == linAcquire {
		// Lost acquires of one client and owner are interchangeable but
		// for their invocation.
		for _, id := range s.lostAcqPools[op.client] {
			if s.pools[id].owner == op.owner && s.pools[id].shared == op.shared {
				s.pools[id].ops = append(s.pools[id].ops, i)
				return
			}
		}
		id := int32(len(s.pools))
		s.pools = append(s.pools, pool{kind: linAcquire, client: op.client, owner: op.owner, shared: op.shared, ops: []int32{i}})
		s.lostAcqPools[op.client] = append(s.lostAcqPools[op.client], id)
		s.lostAcqAll = append(s.lostAcqAll, id)
		if op.shared {
			s.lostReadPools = append(s.lostReadPools, id)
			if c := int(op.client); c >= 0 {
				s.lostReadPoolsOf = grown(s.lostReadPoolsOf, c)
				s.lostReadPoolsOf[c] = append(s.lostReadPoolsOf[c], id)
				if op.owner != 0 {
					s.lostReadOwned = grown(s.lostReadOwned, c)
					s.lostReadOwned[c] = true
				}
			}
		} else {
			s.lostWritePools = append(s.lostWritePools, id)
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
	s.lostRelPools[op.client] = append(s.lostRelPools[op.client], id)
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
		s.lostRelIndex[[2]int32{op.client, key}] = id
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
	if id, ok := s.lostRelIndex[[2]int32{client, key}]; ok {
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
		for _, id := range s.lostRelPools[client] {
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
		s.anyLostAcquire(d, tryIA)
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
		s.anyLostAcquire(d, tryIA)
	} else if s.nest {
		for _, id := range s.lostAcqPools[st.client] {
			tryIA(id)
		}
	}
	s.nest = false
}

// anyLostAcquire calls try with every pool of lost acquires (an exclusive
// lock that is free, or whose lease may have run out: any of them may take
// it). A beam pass (sweep_beam.go) tries the newest pools first, and stops
// once beamMoves * beam of them gave a configuration that none seen
// dominates; the pools it did not try that have an operation left for d
// count as cut.
func (s *sweep) anyLostAcquire(d *config, try func(int32)) {
	if s.beam <= 0 {
		for _, id := range s.lostAcqAll {
			try(id)
		}
		return
	}
	left := beamMoves * s.beam
	for k := len(s.lostAcqAll) - 1; k >= 0; k-- {
		id := s.lostAcqAll[k]
		if s.avail(d, id) >= int32(len(s.pools[id].ops)) {
			continue
		}
		if left == 0 {
			s.stats.Beam++
			continue
		}
		n := len(s.seen) + len(s.next)
		try(id)
		if len(s.seen)+len(s.next) > n {
			left--
		}
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
		for _, id := range s.lostWritePools {
			try(id)
		}
	}
	x := &s.ops[s.x]
	if s.m.reentrant || d.s.client != 0 || (x.out == outHeld && !d.s.held()) {
		for _, id := range s.lostReadPools {
			try(id)
		}
		return
	}
	readersOf := func(c int32) {
		if c < 0 || int(c) >= len(s.lostReadPoolsOf) {
			for _, id := range s.lostAcqPools[c] {
				if s.pools[id].shared {
					try(id)
				}
			}
			return
		}
		for _, id := range s.lostReadPoolsOf[c] {
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

// lostRelease reports whether client has a lost release left for d that
// may free its hold with owner.
func (s *sweep) lostRelease(d *config, client, owner int32) bool {
	return !s.freeing(client, owner, func(id int32) bool { return s.avail(d, id) >= int32(len(s.pools[id].ops)) })
}
