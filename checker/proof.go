package checker

import (
	"fmt"
	"sort"

	"github.com/locktest/locktest/history"
)

// A cheap proof of non-linearizability: two grants that no order of the
// history can separate, whatever its open (indeterminate) operations did.
//
// On a mutex that is not reentrant (lockModel.step), once an acquire A took
// the lock at its point pA, the lock stays held by A's client until one of
// two things: a release of A's client that owns the hold (ownsHold) is
// placed, at a point no earlier than that release's invocation, or A's
// lease may have expired, at A.call + life at the earliest (the model's
// expiry; a lost acquire can take an expired lease over, not a live one).
// Nothing else frees it: a release frees only the holds of its own client,
// and an acquire never succeeds on a lock held by another client's live
// lease. So the lock is surely held by A over [pA, until(A)), where
//
//	until(A) = max(A.call, min(F(A), A.call + life))
//
// and F(A) is the earliest invocation of a release of A's client that may
// free A (one invoked before A that may still be placed after A's
// invocation counts: a lost release naming no owner, say).
//
// If B, another client's successful acquire, returned before until(A), B
// cannot come after A (pB <= B.ret < until(A), and at pB the lock must be
// free or expired); if also A returned before until(B), A cannot come
// after B. Then no order places both: the history is not linearizable,
// and {A, B} (with the absence of those releases) is the witness. This is
// a proof in the same model the sweep checks, found in O(n log n); the
// sweep, whose search can blow up first, is still run, within its budget,
// to name the first operation that cannot be placed.

// doubleGrant is a proven double grant: ops a and b (indices into the
// operations given to provenDoubleGrant), each returned while the other
// surely held the lock.
type doubleGrant struct {
	a, b           int32
	untilA, untilB int64
}

// provenDoubleGrant returns a double grant that proves ops (in order of
// invocation) not linearizable under m, if it finds one. It looks only at
// exclusive, non-reentrant locks (the read-write and reentrant models nest
// or share, and are left to the search).
func provenDoubleGrant(ops []lockOp, m lockModel) (doubleGrant, bool) {
	if m.rw || m.reentrant {
		return doubleGrant{}, false
	}
	// The releases that may free a hold of client c with a known owner o
	// (ownsHold): those of c naming o, and those of c naming no owner.
	// For the first, the earliest invocation by (c, o); for the second,
	// per client in order of invocation, with the latest return so far.
	type zeroRels struct{ calls, maxRet []int64 }
	named := map[[2]int32]int64{}
	zero := map[int32]*zeroRels{}
	for k := range ops {
		r := &ops[k]
		if r.kind != linRelease {
			continue
		}
		if r.owner == 0 {
			z := zero[r.client]
			if z == nil {
				z = &zeroRels{}
				zero[r.client] = z
			}
			mr := r.ret
			if n := len(z.maxRet); n > 0 {
				mr = max(mr, z.maxRet[n-1])
			}
			z.calls, z.maxRet = append(z.calls, r.call), append(z.maxRet, mr)
			continue
		}
		key := [2]int32{r.client, r.owner}
		if c, ok := named[key]; !ok || r.call < c {
			named[key] = r.call
		}
	}
	type grant struct {
		i     int32
		until int64
	}
	var grants []grant
	for k := range ops {
		a := &ops[k]
		if a.kind != linAcquire || a.out != outOK || a.ret == history.Never || a.owner <= 0 {
			continue
		}
		// F(A): the earliest invocation of a release of A's client that
		// may free A and may be placed after A's invocation (one invoked
		// earlier only while it may still be running or is lost: then
		// F(A) <= A.call and A proves nothing).
		f := int64(history.Never)
		if c, ok := named[[2]int32{a.client, a.owner}]; ok {
			f = c
		}
		if z := zero[a.client]; z != nil {
			n := sort.Search(len(z.calls), func(k int) bool { return z.calls[k] >= a.call })
			if n > 0 && z.maxRet[n-1] >= a.call {
				f = min(f, a.call)
			}
			if n < len(z.calls) {
				f = min(f, z.calls[n])
			}
		}
		until := f
		if m.lease {
			until = min(until, satAdd(a.call, m.life()))
		}
		until = max(until, a.call)
		grants = append(grants, grant{i: int32(k), until: until})
	}
	if len(grants) < 2 {
		return doubleGrant{}, false
	}
	// By return: for B, every A with A.ret < until(B) is a prefix; it
	// proves a double grant if until(A) > B.ret and A is another client's.
	// Keep, per prefix, the two largest untils of distinct clients.
	sort.Slice(grants, func(x, y int) bool { return ops[grants[x].i].ret < ops[grants[y].i].ret })
	type best struct {
		until  int64
		i      int32
		client int32
	}
	none := best{until: -history.Never, i: -1, client: -1 << 30}
	first := make([]best, len(grants)+1)
	second := make([]best, len(grants)+1)
	first[0], second[0] = none, none
	for k, g := range grants {
		c := best{until: g.until, i: g.i, client: ops[g.i].client}
		f, s := first[k], second[k]
		switch {
		case c.until > f.until:
			if c.client != f.client {
				s = f
			}
			f = c
		case c.client != f.client && c.until > s.until:
			s = c
		}
		first[k+1], second[k+1] = f, s
	}
	for _, g := range grants {
		b := &ops[g.i]
		n := sort.Search(len(grants), func(k int) bool { return ops[grants[k].i].ret >= g.until })
		for _, c := range []best{first[n], second[n]} {
			if c.i >= 0 && c.client != b.client && c.until > b.ret {
				return doubleGrant{a: c.i, b: g.i, untilA: c.until, untilB: g.until}, true
			}
		}
	}
	return doubleGrant{}, false
}

// anomaly explains a proven double grant.
func (d doubleGrant) anomaly(ops []lockOp, hops []history.Operation, h *history.History, m lockModel) Anomaly {
	a, b := &hops[ops[d.a].index], &hops[ops[d.b].index]
	if a.Call > b.Call {
		a, b = b, a
		d.untilA, d.untilB = d.untilB, d.untilA
	}
	an := Anomaly{
		Kind:    KindNonLinearizable,
		Clients: []int{b.Client, a.Client},
		Start:   min(a.Call, b.Call),
		End:     max(a.Return, b.Return),
		Ops:     []int64{b.OpID, a.OpID},
	}
	// Enough decimals that the times compared below read apart.
	dec := decimalsFor(a.Call, a.Return, b.Call, b.Return, d.untilA, d.untilB)
	at := func(ns int64) string { return atD(ns, dec) }
	why := func(o *history.Operation, until int64) string {
		s := fmt.Sprintf("client %d's %s holds the lock until %s at the earliest", o.Client, describeOpD(o, dec), at(until))
		if m.lease {
			s += " (no release of it was invoked before then"
			if until == satAdd(o.Call, m.life()) {
				s += ", and its lease cannot have expired earlier"
			}
			return s + ")"
		}
		return s + " (no release of it was invoked before then)"
	}
	an.Explanation = fmt.Sprintf("no order of the lock operations is consistent with a %s, whatever the indeterminate operations did: %s, and client %d's acquire returned ok at %s, before that; %s, and client %d's acquire returned ok at %s, before that. Neither grant can come first.",
		m.name(), why(a, d.untilA), b.Client, at(b.Return), why(b, d.untilB), a.Client, at(a.Return))
	if h != nil {
		an.Faults = faultsDuring(h, an.Start, an.End)
	}
	return an
}
