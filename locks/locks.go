// Package locks holds the reference implementations of the lock schemes
// locktest puts under test, each in its own file, all behind one small
// interface. A scheme is written the way the blog post or library it comes
// from writes it, flaws included: the point is to show when it breaks.
package locks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/protocol"
)

// Lease is what a successful acquire hands the client.
type Lease struct {
	// Owner is the unique id the client wrote into the lock; new per acquire.
	Owner string
	// Token is the fencing token, when the scheme gives one (nil otherwise).
	Token *int64
	// Acquired is when the client started the acquire, on its own clock.
	Acquired time.Time
	// ValidUntil is when the client believes its lease ends, on its own
	// clock (Acquired + TTL); zero for schemes without expiry.
	ValidUntil time.Time
	// Monotonic: ValidUntil was measured on Go's monotonic clock (as
	// go-redsync's Until() is), which a step of the wall clock does not
	// move: Left reads time.Now() for it, not the client's (skewable)
	// Clock.
	Monotonic bool
	// Nodes lists the servers that granted the lease, for schemes that ask
	// several.
	Nodes []string
}

// Left is how long the client, reading clock (its wall clock) or, for a
// Monotonic lease, Go's monotonic clock, believes its lease still valid;
// negative once its validity has passed.
func (l Lease) Left(clock Clock) time.Duration {
	if l.Monotonic {
		return time.Until(l.ValidUntil)
	}
	return l.ValidUntil.Sub(clock.Now())
}

// ReleaseResult is what a release learned about the server's state.
type ReleaseResult struct {
	// Removed is the owner id of the key the server deleted, "-" when it
	// deleted nothing, "" when the scheme cannot tell.
	Removed string
}

// Errors every scheme returns for definite, expected outcomes.
var (
	// ErrHeld: the lock is held by somebody else; the acquire had no effect.
	ErrHeld = errors.New("lock held by another client")
	// ErrContended: a try-lock failed, and had no effect, without knowing
	// whether anybody holds the lock (see history.ReasonContended).
	ErrContended = errors.New("lock contended")
	// ErrNotOwner: the release found the lock not ours and changed nothing.
	ErrNotOwner = errors.New("lock not held by this owner")
	// ErrIndeterminate marks an error after which the client cannot know
	// whether the operation took effect, whatever the underlying error says.
	ErrIndeterminate = errors.New("outcome unknown")
	// ErrRejected: the operation surely had no effect, for a reason other
	// than the lock: no server could be reached or would take the request
	// (a read-only replica), or the server refused the statement.
	ErrRejected = errors.New("request rejected, no effect")
)

// Lock is one client's handle on one lock. Methods are called by one
// goroutine at a time.
type Lock interface {
	// Acquire tries once to take the lock (Blocking makes it wait).
	Acquire(ctx context.Context) (Lease, error)
	// Release gives back the lock taken with l.
	Release(ctx context.Context, l Lease) (ReleaseResult, error)
	// Close drops the client's connections.
	Close() error
}

// Clock is the client's idea of the wall time. Schemes read the wall time
// only from it, so the clock-client fault can skew it. A scheme that
// measures durations on Go's monotonic clock, as a real Go program does
// with time.Now() and Sub, which a wall-clock step does not move, reads
// time.Now() itself (Lease.Monotonic).
type Clock interface{ Now() time.Time }

// SkewClock is the real clock plus an adjustable offset: a wall clock
// stepped by the offset.
type SkewClock struct{ offset atomic.Int64 }

// Now returns the wall time plus the offset.
func (c *SkewClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// SetOffset sets the offset added to the real time.
func (c *SkewClock) SetOffset(d time.Duration) { c.offset.Store(int64(d)) }

// Config is what a scheme needs to build a client.
type Config struct {
	Addrs     []string      // server addresses, host:port
	Key       string        // the lock's name
	TTL       time.Duration // lease length, for schemes with expiry
	Fence     bool          // hand out fencing tokens
	OpTimeout time.Duration // deadline of one request to a server
	Client    int           // logical client number, for owner ids
	Clock     Clock         // the client's clock; the real one when nil
	Rand      *rand.Rand    // seeded randomness (owner ids, jitter)
	// Params are scheme-specific settings from the run (Hello.Params).
	Params map[string]string
	// Server is what the topology set up for its clients besides the
	// addresses; the worker fills it in (workloads.ServerSettings).
	Server ServerSettings
}

// ServerSettings are what a topology sets up for its clients besides the
// addresses. A scheme gets them from whoever started the servers instead
// of knowing them itself, so that locks needs nothing of clusters.
type ServerSettings struct {
	// The account and database the MySQL topologies create for clients.
	MySQLUser, MySQLPassword, MySQLDatabase string
	// SentinelMaster is the name the Sentinels monitor the master under.
	SentinelMaster string
}

// Scheme describes a lock scheme.
type Scheme struct {
	Name     string
	Summary  string
	Topology string // which servers it needs, e.g. "redis"
	// Topologies lists the other topologies it also runs on, chosen with
	// --topology (the MySQL schemes run on "mysql-replicated" too).
	Topologies []string
	// Traits are what the lock promises: lease, fencing tokens (--fence),
	// reentrant, validity checks (Lease.ValidUntil, or a Loser's events),
	// whether it reads its own clock, renewals, a session; the same type a client program's ready message
	// and a run's history carry.
	history.Traits
	// ReadWrite: the lock has shared (read) and exclusive (write) holders
	// (a ModeLock); the workload mixes readers and writers.
	ReadWrite bool
	// Points are the fault points inside the client's own steps (the
	// gaps of its check-then-act), where the built-in worker can stop
	// itself when a request asks it to (protocol.Request.StopAt).
	Points []protocol.Point
	New    func(Config) (Lock, error)
}

// Schemes is the registry of every scheme, in the order `locktest list`
// shows them.
var Schemes = []Scheme{
	{Name: "redis-setnx", Topology: "redis", Traits: history.Traits{Fencing: true}, New: newSetNX,
		Summary: "SETNX key id, no TTL; release DEL. A crashed holder keeps the lock forever."},
	{Name: "redis-setnx-expire", Topology: "redis", Traits: history.Traits{Lease: true, Fencing: true}, New: newSetNXExpire, Points: []protocol.Point{afterSetNX},
		Summary: "SETNX then EXPIRE in two round trips; release DEL. A crash between them leaves a lock with no TTL."},
	{Name: "redis-del", Topology: "redis", Traits: history.Traits{Lease: true, Fencing: true}, New: newDel,
		Summary: "SET key id NX PX ttl; release plain DEL with no owner check: can delete another client's lock."},
	{Name: "redis-get-del", Topology: "redis", Traits: history.Traits{Lease: true, Fencing: true}, New: newGetDel, Points: []protocol.Point{afterGet},
		Summary: "SET key id NX PX ttl; release GET, compare the owner in the client, then DEL (as GETDEL): not atomic, a pause between them deletes the next holder's lock."},
	{Name: "redis-lua", Topology: "redis", Traits: history.Traits{Lease: true, Fencing: true}, New: newLua,
		Summary: "SET key id NX PX ttl; release Lua compare-and-delete. The textbook single-instance lock."},
	{Name: "redis-lua-lenient", Topology: "redis", Traits: history.Traits{Lease: true, Fencing: true}, New: newLuaLenient,
		Summary: "SET NX PX; release Lua that returns 1 when the key is not ours, reporting an expired lease as released."},
	{Name: "redlock", Topology: "redis5", Traits: history.Traits{Lease: true, ChecksValidity: true, OwnClock: history.Bool(true)}, New: newRedlock, Points: []protocol.Point{afterCheck},
		Summary: "Redlock over 5 independent masters: majority of SET NX PX within the TTL, validity = TTL - elapsed - drift; no fencing token."},
	{Name: "redisson", Topology: "redis", Traits: history.Traits{Lease: true, Fencing: true, Reentrant: true, Renews: true}, New: newRedisson,
		Summary: "Redisson's RLock: hash {uuid:thread: count} by HINCRBY + PEXPIRE in Lua, reentrant; a watchdog renews the lease every TTL/3; unlock publishes, --wait wakes on it."},
	{Name: "redis-sentinel", Topology: "redis-sentinel", Traits: history.Traits{Lease: true, Fencing: true}, New: newSentinelLua,
		Summary: "SET NX PX + Lua release on the master Sentinel names (master, 2 async replicas, 3 sentinels); follows the new master after a failover."},
	{Name: "mysql-optimistic", Topology: "mysql", Topologies: mysqlAlso, Traits: history.Traits{Lease: true, Fencing: true}, New: newMySQLOptimistic,
		Summary: "read status+version; UPDATE SET status=1, version=version+1 WHERE version=? (a lease: an expired lock may be taken over); release CAS back by owner and version. The version is the fencing token."},
	{Name: "mysql-for-update", Topology: "mysql", Topologies: mysqlAlso, Traits: history.Traits{Fencing: true, Session: true}, New: newMySQLForUpdate,
		Summary: "BEGIN; SELECT ... FOR UPDATE NOWAIT on the lock row, the transaction open for the whole hold; release COMMIT. The server drops the lock with an idle connection (wait_timeout)."},
	{Name: "mysql-unique", Topology: "mysql", Topologies: mysqlAlso, Traits: history.Traits{Fencing: true}, New: newMySQLUnique,
		Summary: "INSERT into a table with a unique key on the lock name; release DELETE by owner. A crashed holder's row stays forever."},
	{Name: "mysql-unique-expiry", Topology: "mysql", Topologies: mysqlAlso, Traits: history.Traits{Lease: true, Fencing: true}, New: newMySQLUniqueExpiry,
		Summary: "as mysql-unique plus an expiry column: an acquirer first deletes an expired row (the cleanup job); release DELETE by owner."},
	{Name: "mysql-get-lock", Topology: "mysql", Topologies: mysqlAlso, Traits: history.Traits{Fencing: true, Session: true}, New: newMySQLGetLock,
		Summary: "GET_LOCK(name, 0) on a pinned connection; release RELEASE_LOCK. The lock lives and dies with the session."},
	{Name: "zk", Topology: "zk3", Traits: history.Traits{Lease: true, Fencing: true, Reentrant: true, Renews: true, Session: true}, New: newZKMutex,
		Summary: "Curator InterProcessMutex on ZooKeeper: protected EPHEMERAL_SEQUENTIAL node, lowest sequence holds, waiters watch their predecessor; reentrant. The node dies with the session (timeout = --ttl), but the client keeps believing. Token: the lock node's czxid (the id of the transaction that created it: only grows; --param zk-token=sequence fences with the sequence number)."},
	{Name: "zk-strict", Topology: "zk3", Traits: history.Traits{Lease: true, Fencing: true, ChecksValidity: true, OwnClock: history.Bool(false), Reentrant: true, Renews: true, Session: true}, New: newZKStrict, Points: []protocol.Point{afterCheck},
		Summary: "zk, but a connection loss (SUSPENDED), an expired session or 2/3 of the session timeout without word from the server counts as lock lost: the client stops using the resource (Curator tech note)."},
	{Name: "zk-semaphore", Topology: "zk3", Traits: history.Traits{Lease: true, Fencing: true, Renews: true, Session: true}, New: newZKSemaphore,
		Summary: "Curator InterProcessSemaphoreMutex: a one-lease semaphore (an internal mutex serializes the lease count); not reentrant."},
	{Name: "zk-rw", Topology: "zk3", ReadWrite: true, Traits: history.Traits{Lease: true, Fencing: true, Renews: true, Session: true}, New: newZKRW,
		Summary: "Curator InterProcessReadWriteLock: __READ__/__WRIT__ sequential nodes; a writer holds when lowest, a reader when no writer precedes it. The workload mixes readers (2/3) and writers."},
	{Name: "etcd", Topology: "etcd3", Traits: history.Traits{Lease: true, Fencing: true, Renews: true, Session: true}, New: newEtcdMutex,
		Summary: "etcd concurrency mutex: session lease (TTL = --ttl, whole seconds) kept alive by the client, key per waiter, lowest create revision holds; try-lock, --wait watches the predecessor. Token: the key's create revision."},
}

// RunsOn reports whether the scheme can run on topology.
func (s Scheme) RunsOn(topology string) bool {
	if topology == s.Topology {
		return true
	}
	for _, t := range s.Topologies {
		if t == topology {
			return true
		}
	}
	return false
}

// Lookup finds a scheme by name.
func Lookup(name string) (Scheme, bool) {
	for _, s := range Schemes {
		if s.Name == name {
			return s, true
		}
	}
	return Scheme{}, false
}

// Names lists the schemes' names.
func Names() []string {
	out := make([]string, len(Schemes))
	for i, s := range Schemes {
		out[i] = s.Name
	}
	return out
}

func (c Config) clock() Clock {
	if c.Clock == nil {
		return realClock{}
	}
	return c.Clock
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

var ownerSeq atomic.Int64

// newOwner returns a fresh owner id: unique per acquire, and telling which
// client wrote it.
func newOwner(c Config) string {
	var r uint32
	if c.Rand != nil {
		r = c.Rand.Uint32()
	}
	return fmt.Sprintf("c%d-%d-%08x", c.Client, ownerSeq.Add(1), r)
}

// Classify maps an operation's error to its outcome in the history: OK for
// nil, Fail with a reason for outcomes that surely had no effect, and Info
// (indeterminate) for everything that may have reached the server: a
// timeout, a reset or closed connection after the request was sent.
func Classify(err error) (history.Type, string) {
	switch {
	case err == nil:
		return history.OK, ""
	case errors.Is(err, ErrIndeterminate):
		return history.Info, ""
	case errors.Is(err, ErrHeld):
		return history.Fail, history.ReasonHeld
	case errors.Is(err, ErrContended):
		return history.Fail, history.ReasonContended
	case errors.Is(err, ErrNotOwner):
		return history.Fail, history.ReasonNotOwner
	case errors.Is(err, ErrRejected):
		return history.Fail, history.ReasonError
	case isDialError(err):
		return history.Fail, history.ReasonError
	}
	return history.Info, ""
}

// isDialError reports whether err happened before anything was sent: the
// connection could not be made at all.
func isDialError(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Blocking turns a try-lock into a blocking acquire, as a blocking client
// library does: retry every interval (jittered by up to half of it) while the
// lock is held or the server cannot be reached, until timeout. An
// indeterminate attempt ends the wait at once (the caller cannot know
// whether it holds the lock). When the time is up the error wraps ErrHeld.
// A lock that waits its own way (a Waiter, such as Redisson's, which wakes
// on the unlock message) does that instead, with the same timeout.
func Blocking(l Lock, interval, timeout time.Duration, r *rand.Rand) Lock {
	if w, ok := l.(Waiter); ok {
		return w.Wait(timeout)
	}
	return &blocking{Lock: l, interval: interval, timeout: timeout, rand: r}
}

// Waiter is a lock with its own blocking acquire. Wait returns the lock
// whose Acquire waits up to timeout while the lock is held; when the time
// is up the error wraps ErrHeld.
type Waiter interface {
	Wait(timeout time.Duration) Lock
}

type blocking struct {
	Lock
	interval, timeout time.Duration
	rand              *rand.Rand
}

func (b *blocking) Acquire(ctx context.Context) (Lease, error) {
	deadline := time.Now().Add(b.timeout)
	tries := 0
	for {
		tries++
		l, err := b.Lock.Acquire(ctx)
		if t, _ := Classify(err); t != history.Fail {
			return l, err
		}
		wait := b.interval
		if b.rand != nil && b.interval > 0 {
			wait += time.Duration(b.rand.Int64N(int64(b.interval)/2+1)) - b.interval/4
		}
		if time.Now().Add(wait).After(deadline) {
			return Lease{}, fmt.Errorf("gave up after %d tries in %s: %w", tries, b.timeout, err)
		}
		select {
		case <-ctx.Done():
			return Lease{}, fmt.Errorf("gave up after %d tries: %w (%w)", tries, err, ctx.Err())
		case <-time.After(wait):
		}
	}
}
