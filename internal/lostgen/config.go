// Package lostgen generates fault-heavy lock histories with ground truth,
// independently of the checker: it simulates one lease-lock server (SET NX
// PX: a grant iff the key is free or its lease ran out; release by
// compare-and-delete on the owner id; optionally no expiry) on a virtual
// clock, with clients looping try-acquire / hold / release, and writes the
// history in locktest's format (package history).
//
// Faults are lost answers: a fraction of acquires and releases never get
// their reply; the client records them as indeterminate ("info") at its op
// timeout, and the server applied them, with probability 1/2, at a random
// moment inside that window. With a lease much shorter than the op timeout
// (50 ms against 1 s), an applied lost acquire holds the lock for a lease
// that no client knows about.
//
// Violations are injected double grants: the server grants an acquire
// while another lease is live. Each is labelled with what the history
// proves (Truth): Certain (no linearization exists whatever the open
// operations did), Explainable (a linearization exists; the generator
// built one) or Unknown (neither was proven).
//
// Generation is deterministic: the same Config gives the same history.
package lostgen

import (
	"errors"
	"fmt"
	"time"
)

// Mix says which injected double grants the generator looks for.
type Mix string

// Injection mixes. The generator waits for a chance of the wanted kind.
// With MixCertain and MixExplainable it makes only those (so maybe fewer
// than Config.Double); with MixMixed, when none comes within half the
// ops between two injections, it injects at the next chance of any kind,
// whose label may then be Unknown.
const (
	// MixAny injects at the first acquire that meets a live lease.
	MixAny Mix = "any"
	// MixCertain waits for a holder whose acquire returned ok and whose
	// lease surely outlives the second grant.
	MixCertain Mix = "certain"
	// MixExplainable waits for a holder that is a lost acquire whose grant
	// can be moved early enough for its lease to end before the second
	// grant.
	MixExplainable Mix = "explainable"
	// MixMixed alternates Certain and Explainable (the default).
	MixMixed Mix = "mixed"
)

// Config describes a history to generate. Zero fields take the defaults
// given in their comments.
type Config struct {
	Seed    int64 // seeds the generator (default 0 is a seed like any other)
	Ops     int   // operations to invoke (default 1000); clients finish the cycle they are in, so a history holds up to 4 per client more
	Clients int   // clients (default 50)
	// Lost is the fraction (0..MaxLost) of acquires and releases whose
	// reply is lost (default 0).
	Lost float64
	// Double is the number of double grants to inject (default 0). A
	// short history may get fewer: Truth.Injections lists those made.
	Double int
	Mix    Mix // which double grants to look for (default MixMixed)

	Lease     time.Duration // lease TTL (default 50ms)
	NoExpiry  bool          // the lock never expires (Lease ignored): a lost acquire that took effect holds it forever
	OpTimeout time.Duration // a client's op timeout: when a lost reply is recorded "info" (default 1s)
	Resource  bool          // holders read the guarded resource, hold, and write it plus one
	// Margin is kept between a lease's end and any instant a label relies
	// on, for clock-rate slack in a checker (default 5ms, the checker's
	// default Slack).
	Margin time.Duration

	RoundTrip time.Duration // mean round trip to the server (default 600µs; drawn in [RoundTrip/3, 5*RoundTrip/3])
	Hold      time.Duration // mean hold, acquire ok to release (default 5ms; capped so a holder releases by half its lease)
	Think     time.Duration // mean pause between a client's cycles (default 10ms)

	Lock       string // RunInfo.Lock (default "redis-lua", whose semantics the server follows)
	DeadlockMs int64  // RunInfo.DeadlockMs (default 10000)

	// DeafClient (from 1; 0: none) never hears a reply to its acquires
	// and releases invoked from DeafFrom for DeafFor, though the server
	// applies each at once: it records "info" after DeafTimeout (default
	// Lease) and retries at once. Its grants, about a lease apart, keep
	// the lock from everybody else while no client knows who holds it:
	// issue 17's unavailability explained by lost answers
	// (Truth.Unavailable). These ops are not counted in Lost's fraction.
	DeafClient                     int
	DeafFrom, DeafFor, DeafTimeout time.Duration

	Trace bool // keep the server's log in Truth.Trace (for tests; memory grows with the history)
}

// Limits of a Config.
const (
	MaxOps     = 5_000_000 // ~90 bytes an operation are kept while generating
	MaxClients = 1000
	MaxLost    = 0.5
)

// ErrConfig is wrapped by every error about a bad Config.
var ErrConfig = errors.New("bad lostgen config")

func (c Config) withDefaults() Config {
	if c.Ops == 0 {
		c.Ops = 1000
	}
	if c.Clients == 0 {
		c.Clients = 50
	}
	if c.Mix == "" {
		c.Mix = MixMixed
	}
	if c.Lease == 0 {
		c.Lease = 50 * time.Millisecond
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = time.Second
	}
	if c.Margin == 0 {
		c.Margin = 5 * time.Millisecond
	}
	if c.RoundTrip == 0 {
		c.RoundTrip = 600 * time.Microsecond
	}
	if c.Hold == 0 {
		c.Hold = 5 * time.Millisecond
	}
	if c.Think == 0 {
		c.Think = 10 * time.Millisecond
	}
	if c.Lock == "" {
		c.Lock = "redis-lua"
	}
	if c.DeafTimeout == 0 {
		c.DeafTimeout = c.Lease
	}
	if c.DeadlockMs == 0 {
		c.DeadlockMs = 10000
	}
	return c
}

// Validate reports the first thing wrong with c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Ops < 1 || c.Ops > MaxOps:
		return fmt.Errorf("%w: ops %d not in 1..%d", ErrConfig, c.Ops, MaxOps)
	case c.Clients < 2 || c.Clients > MaxClients:
		return fmt.Errorf("%w: clients %d not in 2..%d", ErrConfig, c.Clients, MaxClients)
	case !(c.Lost >= 0 && c.Lost <= MaxLost):
		return fmt.Errorf("%w: lost %v not in 0..%v", ErrConfig, c.Lost, MaxLost)
	case c.Double < 0 || c.Double > c.Ops/20:
		return fmt.Errorf("%w: double %d not in 0..ops/20 (%d)", ErrConfig, c.Double, c.Ops/20)
	case c.Mix != MixAny && c.Mix != MixCertain && c.Mix != MixExplainable && c.Mix != MixMixed:
		return fmt.Errorf("%w: mix %q is none of any, certain, explainable, mixed", ErrConfig, c.Mix)
	case c.Lease < 0 || c.OpTimeout < 0 || c.Margin < 0 || c.RoundTrip < 0 || c.Hold < 0 || c.Think < 0:
		return fmt.Errorf("%w: negative duration", ErrConfig)
	case c.Lease%time.Millisecond != 0:
		return fmt.Errorf("%w: lease %v is not whole milliseconds (the history records ttl_ms)", ErrConfig, c.Lease)
	case !c.NoExpiry && c.Lease < 4*(c.Hold+4*c.RoundTrip):
		return fmt.Errorf("%w: lease %v is shorter than 4 holds with their round trips (%v): holders would outlive it", ErrConfig, c.Lease, 4*(c.Hold+4*c.RoundTrip))
	case c.DeafClient < 0 || c.DeafClient > c.Clients:
		return fmt.Errorf("%w: deaf client %d not in 0..%d", ErrConfig, c.DeafClient, c.Clients)
	case c.DeafFrom < 0 || c.DeafFor < 0 || c.DeafTimeout < 4*c.RoundTrip:
		return fmt.Errorf("%w: deaf stretch from %v for %v, timeout %v (at least 4 round trips)", ErrConfig, c.DeafFrom, c.DeafFor, c.DeafTimeout)
	case c.OpTimeout < 4*c.RoundTrip:
		return fmt.Errorf("%w: op timeout %v shorter than 4 round trips", ErrConfig, c.OpTimeout)
	case !c.NoExpiry && c.Margin >= c.Lease/4:
		return fmt.Errorf("%w: margin %v not below a quarter lease", ErrConfig, c.Margin)
	}
	return nil
}
