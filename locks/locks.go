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
	// Nodes lists the servers that granted the lease, for schemes that ask
	// several.
	Nodes []string
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
	// ErrNotOwner: the release found the lock not ours and changed nothing.
	ErrNotOwner = errors.New("lock not held by this owner")
	// ErrIndeterminate marks an error after which the client cannot know
	// whether the operation took effect, whatever the underlying error says.
	ErrIndeterminate = errors.New("outcome unknown")
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

// Clock is the client's idea of the time. Schemes read time only from it,
// so the clock-client fault can skew it.
type Clock interface{ Now() time.Time }

// SkewClock is the real clock plus an adjustable offset.
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
}

// Scheme describes a lock scheme.
type Scheme struct {
	Name     string
	Summary  string
	Topology string // which servers it needs, e.g. "redis"
	Lease    bool   // the lock expires by itself after the TTL
	Fencing  bool   // can hand out fencing tokens (--fence)
	// ChecksValidity: the client stops using the resource once its own
	// computed validity (Lease.ValidUntil, on its clock) has passed.
	ChecksValidity bool
	New            func(Config) (Lock, error)
}

// Schemes is the registry of every scheme, in the order `locktest list`
// shows them.
var Schemes = []Scheme{
	{Name: "redis-setnx", Topology: "redis", Fencing: true, New: newSetNX,
		Summary: "SETNX key id, no TTL; release DEL. A crashed holder keeps the lock forever."},
	{Name: "redis-setnx-expire", Topology: "redis", Lease: true, Fencing: true, New: newSetNXExpire,
		Summary: "SETNX then EXPIRE in two round trips; release DEL. A crash between them leaves a lock with no TTL."},
	{Name: "redis-del", Topology: "redis", Lease: true, Fencing: true, New: newDel,
		Summary: "SET key id NX PX ttl; release plain DEL with no owner check: can delete another client's lock."},
	{Name: "redis-lua", Topology: "redis", Lease: true, Fencing: true, New: newLua,
		Summary: "SET key id NX PX ttl; release Lua compare-and-delete. The textbook single-instance lock."},
	{Name: "redis-lua-lenient", Topology: "redis", Lease: true, Fencing: true, New: newLuaLenient,
		Summary: "SET NX PX; release Lua that returns 1 when the key is not ours, reporting an expired lease as released."},
	{Name: "redlock", Topology: "redis5", Lease: true, ChecksValidity: true, New: newRedlock,
		Summary: "Redlock over 5 independent masters: majority of SET NX PX within the TTL, validity = TTL - elapsed - drift; no fencing token."},
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
	case errors.Is(err, ErrNotOwner):
		return history.Fail, history.ReasonNotOwner
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
func Blocking(l Lock, interval, timeout time.Duration, r *rand.Rand) Lock {
	return &blocking{Lock: l, interval: interval, timeout: timeout, rand: r}
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
