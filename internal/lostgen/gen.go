package lostgen

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/locktest/locktest/history"
)

// kinds of simulation events.
const (
	evInvoke   = iota // a client invokes its next operation
	evApply           // the server applies a lock operation
	evComplete        // a client records a completion (or its op timeout)
)

type item struct {
	t      int64
	seq    uint64
	kind   uint8
	client int32
	op     int32 // index into gen.ops (evApply, evComplete)
}

// queue is a binary min-heap of items by (t, seq), typed to spare
// container/heap's boxing of every item.
type queue []item

func (q queue) less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}

func (q *queue) push(it item) {
	*q = append(*q, it)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *queue) pop() item {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r := l + 1; r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// opRec is what the generator remembers of one operation.
type opRec struct {
	client  int32
	op      history.Op
	call    int64
	apply   int64 // lock ops: when the server applied it (0 if never)
	ret     int64 // planned completion (op timeout for lost ones)
	lost    bool
	deaf    bool // lost to the deaf client (Config.DeafClient)
	applied bool
	granted bool // acquire: the server granted it; release: it deleted the key
	owner   string
	relCall int64 // acquire: when its client invoked the release naming it (history.Never if never)
	value   int64 // write: the value written
}

// client phases.
const (
	phIdle    = iota // next: acquire
	phRead           // holding, next: read (Resource)
	phWrite          // holding, next: write (Resource)
	phRelease        // holding, next: release
)

type client struct {
	id     int
	phase  int
	n      int   // acquires invoked, for owner ids
	held   int32 // op index of the acquire it holds
	grant  int64 // server time of that grant (the simulation's knowledge, to keep holds inside the lease)
	relInF bool  // a release of its is in flight
	read   int64 // value read in this hold
	next   int64 // when it invokes its next operation
}

type refusal struct{ call, apply int64 }

// pending is an armed injection waiting for its chance.
type pending struct {
	want  Mix
	since int
}

type gen struct {
	cfg   Config
	rnd   *rand.Rand
	emit  func(history.Event) error
	q     queue
	seq   uint64
	now   int64
	ops   []opRec
	cl    []client
	lease int64 // ns; history.Never without expiry

	invoked int
	err     error

	// the server's key
	holder    int32 // op index of the acquire holding it, -1 when free
	expires   int64
	grantAt   int64
	freeSince int64
	refused   []refusal // non-lost acquires refused during the current lease

	resource int64

	targets  []int // invoked-op counts at which an injection is armed
	armed    *pending
	nextWant int
	injected []injRec

	truth    Truth
	stretch  Stretch // since the last grant of an acquire that returned ok
	openLost int
	lastT    int64
	openArea float64
}

type injRec struct {
	b, h   int32
	at     int64
	moveTo int64 // 0 when the holder's grant cannot be moved
}

func newGen(cfg Config, emit func(history.Event) error) *gen {
	g := &gen{
		cfg:    cfg,
		rnd:    rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6c6f737467656e)), // "lostgen"
		emit:   emit,
		holder: -1,
		lease:  int64(cfg.Lease),
	}
	if cfg.NoExpiry {
		g.lease = history.Never
	}
	g.cl = make([]client, cfg.Clients)
	g.ops = make([]opRec, 0, cfg.Ops+4*cfg.Clients)
	if cfg.Double > 0 {
		lo, hi := cfg.Ops/20, cfg.Ops-cfg.Ops/10
		for range cfg.Double {
			g.targets = append(g.targets, lo+g.rnd.IntN(max(1, hi-lo)))
		}
		sort.Ints(g.targets)
	}
	return g
}

func (g *gen) push(t int64, kind uint8, c int, op int32) {
	g.seq++
	g.q.push(item{t: t, seq: g.seq, kind: kind, client: int32(c), op: op})
}

// uniform draws in [lo, hi] ns, at least 1.
func (g *gen) uniform(lo, hi int64) int64 {
	if hi <= lo {
		return max(lo, 1)
	}
	return max(lo+g.rnd.Int64N(hi-lo+1), 1)
}

func (g *gen) roundTrip() int64 {
	rt := int64(g.cfg.RoundTrip)
	return g.uniform(rt/3, 5*rt/3)
}

func (g *gen) gap() int64 { return g.uniform(20_000, 100_000) } // client-side work between ops

func (g *gen) record(e history.Event) {
	if g.err != nil {
		return
	}
	e.Time = g.now
	if err := g.emit(e); err != nil {
		g.err = fmt.Errorf("emit event at %d ns: %w", g.now, err)
	}
	g.truth.Events++
}

// run simulates until every client has finished its last cycle and
// returns the time of the last operation event.
func (g *gen) run() (int64, error) {
	var t int64
	for i := range g.cl {
		t += g.uniform(5_000, 20_000)
		g.cl[i] = client{id: i + 1, held: -1}
		g.now = t
		g.record(history.Event{Type: history.ClientStart, Client: i + 1, PID: 100000 + i})
	}
	for i := range g.cl {
		g.push(t+g.uniform(10_000, 2_000_000), evInvoke, i, -1)
	}
	for len(g.q) > 0 && g.err == nil {
		it := g.q.pop()
		g.advance(it.t)
		switch it.kind {
		case evInvoke:
			g.invoke(int(it.client))
		case evApply:
			g.apply(it.op)
		case evComplete:
			g.complete(it.op)
		}
	}
	return g.now, g.err
}

func (g *gen) advance(t int64) {
	g.openArea += float64(g.openLost) * float64(t-g.lastT)
	g.lastT = t
	g.now = t
}

func (g *gen) invoke(ci int) {
	c := &g.cl[ci]
	if c.phase == phIdle && g.invoked >= g.cfg.Ops {
		return // the run is over for this client: it finished its cycle
	}
	g.invoked++
	g.truth.Ops++
	g.armIfDue()
	idx := int32(len(g.ops))
	r := opRec{client: int32(c.id), call: g.now, relCall: history.Never}
	e := history.Event{Type: history.Invoke, Client: c.id, OpID: int64(idx) + 1}
	switch c.phase {
	case phIdle:
		c.n++
		r.op, r.owner = history.Acquire, "c"+strconv.Itoa(c.id)+"-"+strconv.Itoa(c.n)
	case phRead:
		r.op = history.Read
	case phWrite:
		r.op, r.value = history.Write, c.read+1
		e.Value = history.Int64(r.value)
	case phRelease:
		r.op, r.owner = history.Release, g.ops[c.held].owner
		e.Owner = r.owner
		g.ops[c.held].relCall = g.now
		c.relInF = true
	}
	e.Op = r.op
	g.record(e)
	switch r.op {
	case history.Acquire, history.Release:
		if deaf := g.deaf(c.id); deaf || g.rnd.Float64() < g.cfg.Lost {
			r.lost, r.deaf = true, deaf
			g.truth.Lost++
			g.openLost++
			g.truth.MaxOpenLost = max(g.truth.MaxOpenLost, g.openLost)
			switch {
			case deaf:
				// the server hears it at once, always as fast: with
				// DeafTimeout equal to the lease, each retry reaches it as
				// the lease of the one before runs out
				r.ret = g.now + int64(g.cfg.DeafTimeout)
				g.push(g.now+int64(g.cfg.RoundTrip)/2, evApply, ci, idx)
			case g.rnd.IntN(2) == 0:
				// applied at a random moment inside the call window
				r.ret = g.now + int64(g.cfg.OpTimeout)
				g.push(g.now+g.uniform(1, int64(g.cfg.OpTimeout)-1), evApply, ci, idx)
			default:
				r.ret = g.now + int64(g.cfg.OpTimeout)
			}
		} else {
			rt := g.roundTrip()
			r.ret = g.now + rt
			g.push(g.now+max(1, rt*int64(20+g.rnd.IntN(61))/100), evApply, ci, idx)
		}
	default:
		r.ret = g.now + g.roundTrip()
	}
	g.ops = append(g.ops, r)
	g.push(r.ret, evComplete, ci, idx)
}

// expire frees the key when its lease ran out by now.
func (g *gen) expire() {
	if g.holder >= 0 && g.expires <= g.now {
		g.freeSince = g.expires
		g.holder = -1
		g.refused = g.refused[:0]
	}
}

func (g *gen) grant(i int32, injected bool) {
	o := &g.ops[i]
	o.granted = true
	g.holder, g.grantAt = i, g.now
	g.expires = history.Never
	if g.lease != history.Never {
		g.expires = g.now + g.lease
	}
	g.refused = g.refused[:0]
	if o.lost {
		g.truth.LostGranted++
		g.stretch.LostGrants++
	} else {
		g.endStretch()
	}
	g.trace(i, StepGrant, injected)
}

func (g *gen) apply(i int32) {
	o := &g.ops[i]
	o.apply, o.applied = g.now, true
	if o.lost {
		g.truth.LostApplied++
	}
	g.expire()
	switch o.op {
	case history.Acquire:
		switch {
		case g.holder < 0:
			g.grant(i, false)
		case g.armed != nil && g.fits(i):
			g.inject(i)
		default:
			g.trace(i, StepRefuse, false)
			if !o.lost && g.ops[g.holder].lost {
				g.stretch.RefusedUnderLost++
			} else if !o.lost {
				g.stretch.RefusedUnderKnown++
			}
			if !o.lost {
				g.refused = append(g.refused, refusal{o.call, g.now})
			}
		}
	case history.Release:
		if g.holder >= 0 && g.ops[g.holder].owner == o.owner {
			o.granted = true
			g.trace(i, StepDelete, false)
			g.holder, g.freeSince = -1, g.now
			g.refused = g.refused[:0]
		} else {
			g.trace(i, StepKeep, false)
		}
	}
}

func (g *gen) trace(i int32, k StepKind, injected bool) {
	if g.cfg.Trace {
		s := Step{At: g.now, Op: int64(i) + 1, Kind: k, Injected: injected}
		if k == StepGrant {
			s.Expires = g.expires
		}
		g.truth.Trace = append(g.truth.Trace, s)
	}
}

func (g *gen) complete(i int32) {
	o := &g.ops[i]
	c := &g.cl[o.client-1]
	e := history.Event{Client: c.id, Op: o.op, OpID: int64(i) + 1, Latency: o.ret - o.call}
	next := g.now + g.gap()
	switch {
	case o.lost:
		e.Type, e.Error = history.Info, "timeout after "+time.Duration(o.ret-o.call).String()
		g.openLost--
		if o.op == history.Release {
			c.relInF = false
		}
		c.phase, next = phIdle, g.now+g.think()
		if o.deaf {
			next = g.now // it retries at once
		}
	case o.op == history.Acquire && o.granted:
		e.Type, e.Owner = history.OK, o.owner
		c.held, c.grant = i, o.apply
		if g.cfg.Resource {
			c.phase = phRead
		} else {
			c.phase, next = phRelease, g.holdUntil(c, 0)
		}
	case o.op == history.Acquire:
		e.Type, e.Reason, e.Error = history.Fail, history.ReasonHeld, "lock held by another client"
		c.phase, next = phIdle, g.now+g.think()
	case o.op == history.Read:
		e.Type, e.Value = history.OK, history.Int64(g.resource)
		c.read = g.resource
		c.phase, next = phWrite, g.holdUntil(c, 2*int64(g.cfg.RoundTrip))
	case o.op == history.Write:
		e.Type, e.Value, e.Prev = history.OK, history.Int64(o.value), history.Int64(g.resource)
		g.resource = o.value
		c.phase = phRelease
	case o.op == history.Release && o.granted:
		e.Type, e.Removed = history.OK, o.owner
		c.relInF = false
		c.phase, next = phIdle, g.now+g.think()
	default: // release that deleted nothing
		e.Type, e.Removed, e.Reason, e.Error = history.Fail, "-", history.ReasonNotOwner, "lock not held by this owner"
		c.relInF = false
		c.phase, next = phIdle, g.now+g.think()
	}
	g.record(e)
	c.next = next
	g.push(next, evInvoke, c.id-1, -1)
}

// deaf reports whether client id hears no reply now.
func (g *gen) deaf(id int) bool {
	from := int64(g.cfg.DeafFrom)
	return id == g.cfg.DeafClient && g.now >= from && g.now < from+int64(g.cfg.DeafFor)
}

func (g *gen) think() int64 { return g.uniform(0, 2*int64(g.cfg.Think)) }

// holdUntil returns when a holder invokes its next step after holding: a
// drawn hold, capped so that the release (after, ns of further steps) is
// invoked by half the lease after the grant.
func (g *gen) holdUntil(c *client, after int64) int64 {
	h := int64(g.cfg.Hold)
	t := g.now + g.uniform(h/5, 9*h/5)
	if g.lease != history.Never {
		t = min(t, c.grant+g.lease/2-after)
	}
	return max(t, g.now+g.gap())
}

// armIfDue arms the next injection when its op count is reached.
func (g *gen) armIfDue() {
	for len(g.targets) > 0 && g.invoked >= g.targets[0] {
		if g.armed != nil {
			// the next one is due: it waits for this one, which, in a
			// mixed mix, has waited long enough
			if g.cfg.Mix == MixMixed {
				g.armed.want = MixAny
			}
			break
		}
		g.targets = g.targets[1:]
		want := g.cfg.Mix
		if want == MixMixed {
			want = MixCertain
			if g.nextWant%2 == 1 && g.cfg.Lost > 0 && !g.cfg.NoExpiry {
				want = MixExplainable
			}
			g.nextWant++
		}
		g.armed = &pending{want: want, since: g.invoked}
	}
	if g.armed != nil && g.cfg.Mix == MixMixed && g.armed.want != MixAny {
		budget := g.cfg.Ops / (2 * max(1, g.cfg.Double))
		if g.invoked-g.armed.since > budget {
			g.armed.want = MixAny
		}
	}
}

// fits reports whether granting acquire b now, over the live lease, is a
// chance of the armed kind.
func (g *gen) fits(b int32) bool {
	h := &g.ops[g.holder]
	bo := &g.ops[b]
	margin := int64(g.cfg.Margin)
	switch g.armed.want {
	case MixCertain:
		hc := &g.cl[h.client-1]
		if h.lost || bo.lost || h.ret >= bo.call || hc.relInF || h.relCall != history.Never || hc.next <= bo.ret {
			return false
		}
		return g.lease == history.Never || bo.ret+margin < h.call+g.lease
	case MixExplainable:
		return g.moveTo() > 0
	}
	return true
}

// explainEps is kept, in an Explainable linearization, between the moved
// lease and the instants around it. The linearization holds with exact
// leases; the distance only keeps it clear of rounding.
const explainEps = int64(time.Millisecond)

// moveTo returns where the current holder's grant can move so that its
// lease ends, with margin, before now, or 0 when it cannot (see
// Explainable). Only a lost acquire's grant can move: nobody saw it.
func (g *gen) moveTo() int64 {
	h := &g.ops[g.holder]
	if !h.lost || g.lease == history.Never {
		return 0
	}
	eps := min(int64(g.cfg.Margin), explainEps)
	t := max(h.call, g.freeSince+eps)
	end := t + g.lease - eps // refusals are placed before here, inside the moved lease
	if t+g.lease+eps > g.now || t > g.grantAt {
		return 0
	}
	for _, r := range g.refused {
		if r.apply >= end && r.call >= end {
			return 0 // refused where the moved lease has ended, and cannot move inside it
		}
	}
	return t
}

func (g *gen) inject(b int32) {
	rec := injRec{b: b, h: g.holder, at: g.now, moveTo: g.moveTo()}
	g.injected = append(g.injected, rec)
	g.armed = nil
	g.grant(b, true)
}

// endStretch closes the stretch since the last grant that returned ok (at
// a new one, or at the end) and keeps it when it is the longest.
func (g *gen) endStretch() {
	g.stretch.To = g.now
	if g.stretch.To-g.stretch.From > g.truth.Unavailable.To-g.truth.Unavailable.From {
		g.truth.Unavailable = g.stretch
	}
	g.stretch = Stretch{From: g.now}
}
