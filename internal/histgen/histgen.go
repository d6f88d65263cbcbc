// Package histgen generates synthetic lock histories for tests and
// benchmarks: clients looping try-acquire / hold / release against a
// simulated (lease) lock server, optionally reading and incrementing a
// guarded resource while they hold the lock, with lost answers
// (indeterminate operations) and injected violations.
//
// Generation is deterministic: the same Config (including Seed) gives the
// same events.
package histgen

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/locktest/locktest/history"
)

// Config describes a history to generate. Zero fields take the defaults
// given in their comments.
type Config struct {
	Seed    uint64 // seeds the generator's PCG source
	Clients int    // number of clients (default 5)
	Ops     int    // client operations to generate, at least (default 1000)
	// Indeterminate is the fraction of acquires and releases whose answer
	// is lost: the history records them as indeterminate ("info") and the
	// server applied them or not, with equal chance.
	Indeterminate float64
	Lease         bool          // keys expire by themselves after TTL
	TTL           time.Duration // lease TTL, whole milliseconds (default 50ms)
	Resource      bool          // holders read the resource and write it plus one
	Tokens        bool          // writes carry the holder's fencing token
	Fence         bool          // the resource rejects stale tokens (implies Tokens and Resource)
	// Reentrant: every hold takes the lock a second time, nested, with the
	// same owner, and releases it twice (as Redisson's RLock); the server
	// counts, and the inner release removes nothing (Removed "").
	Reentrant bool
	// Renews: a watchdog renews the lease while its holder holds it (as
	// Redisson's): the server's key does not expire then, and holds may
	// outlast the TTL (Hold is not capped at TTL/2).
	Renews bool
	// ChecksValidity: successful acquires carry the client's validity
	// (TTL less 2% drift, as Redlock computes it) and the client declines
	// reads and writes after it ("not-held").
	ChecksValidity bool
	// ReadWrite: a read-write lock. Each acquire is a reader's (with
	// probability Readers, default 2/3) or a writer's; readers share the
	// lock and, with Resource, only read it.
	ReadWrite bool
	Readers   float64
	RoundTrip time.Duration // mean round trip to the lock server (default 600µs)
	// OpTimeout, when set, is how long a client waits for a lost answer
	// before it gives up (the indeterminate operation's completion): the
	// shape of a real run, where it is many leases long (issue 17). By
	// default a lost answer is given up on after ~10 round trips.
	OpTimeout time.Duration
	Hold      time.Duration // mean time from acquire ok to release (default 1ms)

	// Violations to inject. Each is made at the first chances that arise
	// (at random, half of them are let pass), so a short history may get
	// fewer than asked for: Output.Injected lists those actually made.

	// DoubleHolders: the server grants an acquire while another client
	// holds the lock and keeps holding it until after the grant returns.
	// On a read-write lock: grants a writer while another client holds
	// it, reader or writer.
	DoubleHolders int
	// ReadersUnderWriter (read-write locks): the server grants a reader
	// while a writer holds the lock, who keeps holding it until after the
	// grant returns.
	ReadersUnderWriter int
	// ForeignReleases: an idle client sends a stray release that the
	// server executes on the current holder's key.
	ForeignReleases int
	// LostUpdates: the resource serves a holder a stale read (one less
	// than its value), so its write overwrites the last increment.
	LostUpdates int
}

// Injected lists the violations a history actually contains by design.
type Injected struct {
	DoubleHolders   []int64 // acquires granted while another client held the lock
	ForeignReleases []int64 // releases that deleted another client's key
	LostUpdates     []int64 // writes that overwrote an increment
	// ReadersUnderWriter: read acquires granted while a writer held the
	// lock (read-write locks).
	ReadersUnderWriter []int64
}

// Total returns the number of injected violations.
func (in Injected) Total() int {
	return len(in.DoubleHolders) + len(in.ForeignReleases) + len(in.LostUpdates) + len(in.ReadersUnderWriter)
}

// Output is a generated history.
type Output struct {
	Events   []history.Event
	Injected Injected
}

// History parses the generated events.
func (o Output) History() (*history.History, error) {
	return history.FromEvents(o.Events)
}

type phase uint8

const (
	phInvoke   phase = iota // start the next operation
	phApply                 // the server applies the current lock operation
	phComplete              // the current operation completes
	phDone                  // the client stopped
)

type client struct {
	id    int
	next  int64 // time of the next step
	phase phase
	pos   int // position in the heap

	// the operation in flight
	op      history.Op
	opID    int64
	owner   string
	mode    string // acquire on a read-write lock: read or write
	stray   bool
	lost    bool // the answer will be lost
	applied bool // the server applied it
	result  history.Type
	reason  string
	removed string
	token   int64
	done    int64 // completion time

	// what the client believes
	holding    bool
	nested     bool // the nested acquire of a reentrant hold was tried
	depth      int
	holdOwner  string
	holdMode   string
	holdToken  int64
	holdUntil  int64
	validUntil int64
	minRelease int64
	read       bool
	wrote      bool
	readValue  int64
	staleRead  bool
	retry      string // owner of a release to (re)send: cleanup or retry
	acquires   int
	lastOwner  string
}

type key struct {
	owner   string
	client  int
	expires int64
	count   int
}

type gen struct {
	cfg    Config
	rng    *rand.Rand
	events []history.Event
	out    Injected
	opID   int64
	ops    int
	heap   []*client
	cs     []*client
	ttl    int64
	rtt    int64

	key       *key
	readers   []*key // read-write: the readers' keys
	token     int64
	resource  int64
	maxToken  int64
	injDouble int
	injStray  int
	injLost   int
	injReader int
}

// Generate simulates cfg and returns the history.
func Generate(cfg Config) Output {
	if cfg.Clients <= 0 {
		cfg.Clients = 5
	}
	if cfg.Ops <= 0 {
		cfg.Ops = 1000
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 50 * time.Millisecond
	}
	if cfg.RoundTrip <= 0 {
		cfg.RoundTrip = 600 * time.Microsecond
	}
	if cfg.Hold <= 0 {
		cfg.Hold = time.Millisecond
	}
	if cfg.Fence {
		cfg.Tokens, cfg.Resource = true, true
	}
	ttlMs := int64(cfg.TTL / time.Millisecond)
	if ttlMs < 1 {
		ttlMs = 1
	}
	g := &gen{
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)),
		ttl:       ttlMs * 1e6,
		rtt:       int64(cfg.RoundTrip),
		injDouble: cfg.DoubleHolders,
		injStray:  cfg.ForeignReleases,
		injLost:   cfg.LostUpdates,
		injReader: cfg.ReadersUnderWriter,
	}
	if cfg.ReadWrite && cfg.Readers <= 0 {
		g.cfg.Readers = 2.0 / 3
	}
	g.events = make([]history.Event, 0, 2*cfg.Ops+cfg.Clients+2)
	info := &history.RunInfo{
		FormatVersion: history.FormatVersion,
		Lock:          "histgen",
		Nemeses:       []string{"none"},
		Seed:          int64(cfg.Seed),
		Clients:       cfg.Clients,
		Traits: history.Traits{
			Lease:          cfg.Lease,
			Reentrant:      cfg.Reentrant,
			Renews:         cfg.Renews && cfg.Lease,
			ChecksValidity: cfg.ChecksValidity && cfg.Lease,
		},
		Fence:     cfg.Fence,
		Fencing:   cfg.Tokens,
		ReadWrite: cfg.ReadWrite,
		Cluster:   "simulated",
		Version:   "histgen",
	}
	if cfg.Lease {
		info.TTLMillis = ttlMs
	}
	g.emit(history.Event{Type: history.Run, Info: info}, 0)
	for i := 1; i <= cfg.Clients; i++ {
		g.emit(history.Event{Type: history.ClientStart, Client: i, PID: 1000 + i}, 0)
		c := &client{id: i, next: g.jitter(g.rtt), phase: phInvoke}
		g.cs = append(g.cs, c)
		g.push(c)
	}
	var end int64
	for len(g.heap) > 0 {
		c := g.heap[0]
		end = max(end, c.next)
		switch c.phase {
		case phInvoke:
			g.invoke(c)
		case phApply:
			g.apply(c)
		case phComplete:
			g.complete(c)
		}
		if c.phase == phDone {
			g.pop()
		} else {
			g.fix(c)
		}
	}
	g.emit(history.Event{Type: history.RunEnd, Detail: "workload done"}, end+1)
	return Output{Events: g.events, Injected: g.out}
}

func (g *gen) emit(e history.Event, t int64) {
	e.Seq = int64(len(g.events))
	e.Time = t
	g.events = append(g.events, e)
}

// jitter returns a duration uniform in [d/2, 3d/2).
func (g *gen) jitter(d int64) int64 {
	if d <= 1 {
		return 1
	}
	return d/2 + g.rng.Int64N(d)
}

// invoke starts c's next operation, or stops c.
func (g *gen) invoke(c *client) {
	now := c.next
	g.opID++
	c.opID, c.stray, c.lost, c.owner, c.mode = g.opID, false, false, "", ""
	switch {
	case c.retry != "":
		c.op, c.owner = history.Release, c.retry
	case c.holding && now < c.minRelease:
		// Another client was granted the lock this client holds: stall
		// (as if paused) until after that grant returned.
		g.opID--
		c.next = c.minRelease
		return
	case c.holding && g.cfg.Reentrant && !c.nested:
		c.op, c.owner, c.nested, c.mode = history.Acquire, c.holdOwner, true, c.holdMode
	case c.holding && g.cfg.Resource && !c.read:
		c.op = history.Read
	case c.holding && g.cfg.Resource && !c.wrote:
		c.op = history.Write
	case c.holding && c.depth > 1:
		c.op, c.owner = history.Release, c.holdOwner // the inner release
		c.depth--
	case c.holding:
		c.op, c.owner = history.Release, c.holdOwner
		c.holding = false
	case g.ops >= g.cfg.Ops:
		c.phase = phDone
		g.opID--
		return
	case g.injStray > 0 && c.lastOwner != "" && g.key != nil && g.key.client != c.id &&
		g.holds(g.key) && g.rng.IntN(2) == 0:
		c.op, c.owner, c.stray = history.Release, c.lastOwner, true
	default:
		c.op = history.Acquire
		c.acquires++
		c.owner = "c" + strconv.Itoa(c.id) + "-" + strconv.Itoa(c.acquires)
		c.lastOwner = c.owner
		if g.cfg.ReadWrite {
			c.mode = history.ModeWrite
			if g.rng.Float64() < g.cfg.Readers {
				c.mode = history.ModeRead
			}
		}
	}
	g.ops++
	e := history.Event{Type: history.Invoke, Client: c.id, Op: c.op, OpID: c.opID, Mode: c.mode}
	if c.op == history.Release {
		e.Owner = c.owner
	}
	if c.op == history.Write && g.cfg.Tokens {
		e.Token = history.Int64(c.holdToken)
	}
	g.emit(e, now)

	switch c.op {
	case history.Read, history.Write:
		// Performed by the controller when the client answers.
		c.done = now + 20_000 + g.rng.Int64N(40_000)
		c.phase, c.next = phComplete, c.done
		return
	}
	rtt := g.jitter(g.rtt)
	nestedAcquire := c.op == history.Acquire && c.holding
	c.lost = !c.stray && !nestedAcquire && g.rng.Float64() < g.cfg.Indeterminate
	c.applied = !c.lost || g.rng.IntN(2) == 0
	switch {
	case c.lost && g.cfg.OpTimeout > 0:
		c.done = now + int64(g.cfg.OpTimeout)
	case c.lost:
		c.done = now + 10*g.rtt + g.rng.Int64N(g.rtt)
	default:
		c.done = now + rtt
	}
	c.result, c.reason, c.removed = history.Info, "", ""
	if c.applied {
		c.phase, c.next = phApply, now+rtt/4+g.rng.Int64N(rtt/2+1)
	} else {
		c.phase, c.next = phComplete, c.done
	}
}

// apply runs c's lock operation on the server.
func (g *gen) apply(c *client) {
	now := c.next
	if g.key != nil && g.cfg.Lease && g.key.expires <= now && !(g.cfg.Renews && g.holds(g.key)) {
		g.key = nil
	}
	if g.cfg.Lease {
		g.readers = slices.DeleteFunc(g.readers, func(k *key) bool { return k.expires <= now && !(g.cfg.Renews && g.holds(k)) })
	}
	switch c.op {
	case history.Acquire:
		if g.cfg.ReadWrite {
			g.acquireRW(c, now)
			break
		}
		switch {
		case g.key == nil:
			g.grant(c, now)
		case g.cfg.Reentrant && g.key.owner == c.owner:
			g.key.count++
			g.key.expires = now + g.ttl
			c.result, c.token = history.OK, g.token
		case g.injDouble > 0 && !c.lost && !c.holding && g.key.client != c.id && g.holds(g.key) && g.rng.IntN(2) == 0:
			// Injected: grant a lock another client holds, and make that
			// client keep believing it holds it until after this returns.
			holder := g.cs[g.key.client-1]
			holder.minRelease = max(holder.minRelease, c.done+g.rtt)
			g.grant(c, now)
			g.injDouble--
			g.out.DoubleHolders = append(g.out.DoubleHolders, c.opID)
		default:
			c.result, c.reason = history.Fail, history.ReasonHeld
		}
	case history.Release:
		switch {
		case g.key != nil && g.key.owner == c.owner && g.key.count > 1:
			g.key.count-- // an inner release: nothing removed
			g.key.expires = now + g.ttl
			c.result, c.removed = history.OK, ""
		case g.key != nil && g.key.owner == c.owner:
			c.result, c.removed = history.OK, c.owner
			g.key = nil
		case g.cfg.ReadWrite && g.reader(c.owner) >= 0:
			k := g.readers[g.reader(c.owner)]
			c.result = history.OK
			if k.count > 1 {
				k.count--
				k.expires = now + g.ttl
			} else {
				g.readers = slices.Delete(g.readers, g.reader(c.owner), g.reader(c.owner)+1)
				c.removed = c.owner
			}
		case c.stray && g.key != nil && g.key.client != c.id:
			// Injected: a release that deletes another owner's key.
			c.result, c.removed = history.OK, g.key.owner
			g.key = nil
			g.injStray--
			g.out.ForeignReleases = append(g.out.ForeignReleases, c.opID)
		default:
			c.result, c.reason, c.removed = history.Fail, history.ReasonNotOwner, "-"
		}
	}
	c.phase, c.next = phComplete, c.done
}

// acquireRW runs c's acquire of a read-write lock on the server.
func (g *gen) acquireRW(c *client, now int64) {
	if c.mode == history.ModeRead {
		switch {
		case g.cfg.Reentrant && g.reader(c.owner) >= 0:
			k := g.readers[g.reader(c.owner)]
			k.count++
			k.expires = now + g.ttl
			c.result, c.token = history.OK, g.token
		case g.key == nil:
			g.grantReader(c, now)
		case g.injReader > 0 && !c.lost && !c.holding && g.key.client != c.id && g.holds(g.key) && g.rng.IntN(2) == 0:
			// Injected: a reader granted while a writer holds the lock,
			// who keeps believing it does until after this returns.
			holder := g.cs[g.key.client-1]
			holder.minRelease = max(holder.minRelease, c.done+g.rtt)
			g.grantReader(c, now)
			g.injReader--
			g.out.ReadersUnderWriter = append(g.out.ReadersUnderWriter, c.opID)
		default:
			c.result, c.reason = history.Fail, history.ReasonHeld
		}
		return
	}
	// The other clients that hold the lock and believe so.
	var holders []*client
	for _, k := range append([]*key{g.key}, g.readers...) {
		if k != nil && k.client != c.id && g.holds(k) {
			holders = append(holders, g.cs[k.client-1])
		}
	}
	switch {
	case g.key == nil && len(g.readers) == 0:
		g.grant(c, now)
	case g.cfg.Reentrant && g.key != nil && g.key.owner == c.owner:
		g.key.count++
		g.key.expires = now + g.ttl
		c.result, c.token = history.OK, g.token
	case g.injDouble > 0 && !c.lost && !c.holding && len(holders) > 0 && g.rng.IntN(2) == 0:
		// Injected: a writer granted while others hold the lock.
		for _, h := range holders {
			h.minRelease = max(h.minRelease, c.done+g.rtt)
		}
		g.grant(c, now)
		g.injDouble--
		g.out.DoubleHolders = append(g.out.DoubleHolders, c.opID)
	default:
		c.result, c.reason = history.Fail, history.ReasonHeld
	}
}

// reader returns the position of owner's read key, or -1.
func (g *gen) reader(owner string) int {
	return slices.IndexFunc(g.readers, func(k *key) bool { return k.owner == owner })
}

func (g *gen) grantReader(c *client, now int64) {
	g.token++
	g.readers = append(g.readers, &key{owner: c.owner, client: c.id, expires: now + g.ttl, count: 1})
	c.result, c.token = history.OK, g.token
}

// holds reports whether k's client believes it holds k.
func (g *gen) holds(k *key) bool {
	h := g.cs[k.client-1]
	return h.holding && h.holdOwner == k.owner
}

func (g *gen) grant(c *client, now int64) {
	g.token++
	g.key = &key{owner: c.owner, client: c.id, expires: now + g.ttl, count: 1}
	c.result, c.token = history.OK, g.token
}

// complete records the end of c's operation and plans its next step.
func (g *gen) complete(c *client) {
	now := c.next
	e := history.Event{Client: c.id, Op: c.op, OpID: c.opID}
	next := now + g.jitter(g.rtt)/4
	declined := (c.op == history.Read || c.op == history.Write) && g.cfg.ChecksValidity && g.cfg.Lease && now > c.validUntil
	switch {
	case declined:
		// The client checks its validity, which has ended: it declines
		// the resource and goes on to release.
		e.Type, e.Reason = history.Fail, history.ReasonNotHeld
		c.read, c.wrote, c.staleRead = true, true, false
	case c.op == history.Read:
		e.Type = history.OK
		v := g.resource
		if g.injLost > 0 && v > 0 && c.holdMode != history.ModeRead && g.rng.IntN(2) == 0 {
			v-- // injected: a stale read
			c.staleRead = true
			g.injLost--
		}
		c.readValue, c.read = v, true
		e.Value = history.Int64(v)
	case c.op == history.Write:
		c.wrote = true
		if g.cfg.Fence && c.holdToken < g.maxToken {
			e.Type, e.Reason = history.Fail, history.ReasonStaleToken
			c.staleRead = false
			break
		}
		e.Type = history.OK
		e.Prev = history.Int64(g.resource)
		g.resource = c.readValue + 1
		e.Value = history.Int64(g.resource)
		g.maxToken = max(g.maxToken, c.holdToken)
		if c.staleRead {
			g.out.LostUpdates = append(g.out.LostUpdates, c.opID)
			c.staleRead = false
		}
		next = max(c.holdUntil, c.minRelease, next)
	default: // acquire, release
		e.Type, e.Reason, e.Removed = c.result, c.reason, c.removed
		if c.lost {
			e.Type, e.Reason, e.Removed, e.Error = history.Info, "", "", "timeout"
		}
		switch {
		case c.op == history.Acquire && c.holding:
			// The nested acquire of a reentrant hold.
			if e.Type == history.OK {
				e.Owner = c.owner
				if g.cfg.Tokens {
					e.Token = history.Int64(c.token)
				}
				c.depth = 2
			} else {
				c.read, c.wrote = true, true // give up the hold at once
			}
		case c.op == history.Acquire && e.Type == history.OK:
			e.Owner = c.owner
			if g.cfg.Tokens {
				e.Token = history.Int64(c.token)
			}
			c.holding, c.holdOwner, c.holdToken, c.holdMode = true, c.owner, c.token, c.mode
			c.nested, c.depth = false, 1
			c.minRelease = 0
			c.read, c.wrote = false, c.mode == history.ModeRead // readers only read
			c.holdUntil = now + g.jitter(int64(g.cfg.Hold))
			if g.cfg.Lease && !g.cfg.Renews && c.holdUntil > now+g.ttl/2 {
				c.holdUntil = now + g.ttl/2
			}
			if g.cfg.ChecksValidity && g.cfg.Lease {
				e.Valid = g.ttl - g.ttl/50
				c.validUntil = now + e.Valid
			}
			if !g.cfg.Resource {
				next = max(c.holdUntil, c.minRelease)
			}
		case c.op == history.Acquire && e.Type == history.Info:
			c.retry = c.owner // clean up a key the server may have granted
		case c.op == history.Acquire:
			next = now + g.jitter(g.rtt)
		case e.Type == history.Info:
			c.retry = c.owner
		default:
			c.retry = ""
		}
	}
	g.emit(e, now)
	c.phase, c.next = phInvoke, next
}

// The heap orders clients by (next, id).

func (g *gen) less(a, b *client) bool {
	if a.next != b.next {
		return a.next < b.next
	}
	return a.id < b.id
}

func (g *gen) push(c *client) {
	c.pos = len(g.heap)
	g.heap = append(g.heap, c)
	g.up(c.pos)
}

func (g *gen) pop() {
	n := len(g.heap) - 1
	g.swap(0, n)
	g.heap = g.heap[:n]
	if n > 0 {
		g.down(0)
	}
}

func (g *gen) fix(c *client) {
	if !g.down(c.pos) {
		g.up(c.pos)
	}
}

func (g *gen) swap(i, j int) {
	g.heap[i], g.heap[j] = g.heap[j], g.heap[i]
	g.heap[i].pos, g.heap[j].pos = i, j
}

func (g *gen) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !g.less(g.heap[i], g.heap[p]) {
			return
		}
		g.swap(i, p)
		i = p
	}
}

func (g *gen) down(i int) bool {
	start := i
	n := len(g.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && g.less(g.heap[r], g.heap[l]) {
			m = r
		}
		if !g.less(g.heap[m], g.heap[i]) {
			break
		}
		g.swap(i, m)
		i = m
	}
	return i > start
}
