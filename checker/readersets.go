package checker

import (
	"slices"
	"sync"
)

// Reader sets: the interned, sorted sets of readers a read-write lock
// state points to.

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
