package checker

import (
	"github.com/locktest/locktest/history"
)

// The sequential specification of the lock that both linearizability
// engines check against: the lock sweep (lockcheck.go) and porcupine
// (porcupine.go). One step function serves both, so that they can only
// disagree by how they search.
type linKind uint8

const (
	linAcquire linKind = iota
	linRelease
)

type linOutcome uint8

const (
	outOK       linOutcome = iota
	outHeld                // acquire failed: held
	outNotOwner            // release failed: not the owner
	outUnknown             // indeterminate
)

// lockOp is one lock operation as the engines see it: an acquire or a
// release with its outcome, its client, its owner id (interned; 0 when
// unknown) and its times. ret is history.Never for an indeterminate
// operation, which may take effect at any point after its call, or never.
type lockOp struct {
	kind linKind
	out  linOutcome
	// shared: an acquire in read mode (of a read-write lock).
	shared bool
	client int32
	owner  int32
	index  int32 // in History.Ops; -1 for a synthetic operation
	call   int64
	ret    int64
	// done is, for an indeterminate operation, when its client gave up on
	// it (the time its completion was recorded; Never when none was).
	done int64
	// grantBy, when positive, is for an indeterminate acquire the latest
	// time its lease may have been granted (acqRet): a successful acquire
	// loosened by the window proof (windowproof.go) keeps its return
	// there. 0 for every operation of a history.
	grantBy int64
}

// lockState is the model's state: who holds the lock (client 0: free) with
// which owner id (0: unknown, an indeterminate acquire) and how many times
// (depth, reentrant locks), when the lease was granted (in [acqCall,
// acqRet]) and, with a lease, now: a lower bound on the time of the last
// linearization point (points are monotone and each lies in its
// operation's [call, return]). The times are zero without a lease, where
// they never matter, so that equal states compare equal.
//
// A read-write lock has either one writer (the fields above) or a set of
// readers, each with its own owner, depth and grant times: readers names
// the set, interned by the model (readerSets; 0: no reader), so that a
// state stays a comparable value.
type lockState struct {
	client  int32
	owner   int32
	depth   int32
	readers int32
	acqCall int64
	acqRet  int64
	now     int64
}

// held reports whether anybody holds the lock: a writer (or the holder of
// an exclusive lock) or readers.
func (s lockState) held() bool { return s.client != 0 || s.readers != 0 }

// ownerFresh is the owner of a lock taken by an indeterminate acquire that
// did not name its owner: an id of its own (owners are unique per acquire),
// which no successful acquire carries.
const ownerFresh int32 = -1

// lockModel is the sequential specification of a (lease, reentrant,
// renewing) mutex.
//
// Owners: a release frees the lock only for the owner it names (0, unknown,
// matches any owner of the same client). Owners are unique per acquire,
// except on reentrant locks (Redisson's owner is one per client process),
// so on other locks a key written by an indeterminate acquire that did not
// name its owner (ownerFresh) can only be released by a release naming an
// owner no acquire in the history carries (ow.known).
type lockModel struct {
	lease      bool
	reentrant  bool
	renews     bool // a watchdog renews the lease while the holder lives
	ttl, slack int64
	// early is how long before its grant a lease may have been renewed
	// last: a session's lease (RunInfo.Session with Renews) is older than
	// the grant and was renewed up to TTL/3 before it, so it may expire
	// TTL - TTL/3 after the acquire was invoked. 0 for a lease taken by
	// the acquire itself.
	early int64
	ow    *owners // which owner ids an acquire carries; nil: all unknown
	// rw: a read-write lock (shared acquires take it as readers); rs
	// interns its reader sets.
	rw bool
	rs *readerSets
}

func newLockModel(info history.RunInfo, slack int64, ow *owners) lockModel {
	m := lockModel{
		lease:     info.Lease && info.TTLMillis > 0,
		reentrant: info.Reentrant,
		renews:    info.Renews,
		ttl:       info.TTLMillis * 1e6,
		slack:     slack,
		ow:        ow,
		rw:        info.ReadWrite,
	}
	if info.Session && info.Renews {
		m.early = m.ttl / 3
	}
	if !m.lease && info.Session && info.IdleTimeoutMillis > 0 {
		// A session the server ends when idle (MariaDB closes a
		// connection idle for wait_timeout): the holder's connection is
		// idle from its acquire on, so the lock is a lease of the idle
		// timeout, unless released first.
		m.lease, m.ttl = true, info.IdleTimeoutMillis*1e6
	}
	if m.rw {
		m.rs = newReaderSets()
	}
	return m
}

// expiry is the earliest time s's lease may have run out.
func (m lockModel) expiry(s lockState) int64 { return satAdd(s.acqCall, m.life()) }

// life is how long after its acquire was invoked a lease surely lasts.
func (m lockModel) life() int64 { return m.ttl - m.early - m.slack }

// deadline is the latest time at which s's holder may still release it
// successfully: its lease has surely run out after it. A renewed lease has
// none: it is possibly still valid at any time while its holder lives.
func (m lockModel) deadline(s lockState) int64 {
	if m.renews || !m.lease {
		return history.Never
	}
	return satAdd(s.acqRet, m.ttl+m.slack)
}

// owns reports whether in's client owns the writer's hold of s (the hold
// of an exclusive lock).
func (m lockModel) owns(s lockState, in *lockOp) bool {
	if s.client == 0 {
		return false
	}
	return m.ownsHold(s.client, s.owner, in)
}

// ownsHold reports whether in's client owns a hold of client with owner.
func (m lockModel) ownsHold(client, owner int32, in *lockOp) bool {
	if client != in.client {
		return false
	}
	switch {
	case owner == in.owner, owner == 0, in.owner == 0:
		return true
	case owner == ownerFresh:
		return !m.ow.isKnown(in.owner)
	}
	return false
}

// at returns s at time t (monotone) when the model tracks time.
func (m lockModel) at(s lockState, t int64) lockState {
	if m.lease {
		s.now = max(s.now, t)
	}
	return s
}

// taken is the state after in took the lock at point t. The lease was
// granted at some time in [in.call, in.ret]: for an indeterminate acquire,
// any time after its call (ret is Never), so its lease may have run out
// from call + TTL on, and when it surely has is unknown.
//
// (Taking the grant of an indeterminate acquire to be its point would be
// more precise, but would make a later point sometimes better - a later
// deadline - and every effect would no longer be monotone in time, which
// both engines' searches rely on.)
func (m lockModel) taken(in *lockOp, t int64) lockState {
	s := lockState{client: in.client, owner: in.owner, depth: 1}
	if in.owner == 0 && in.ret == history.Never && !m.reentrant {
		s.owner = ownerFresh
	}
	if m.lease {
		s.acqCall, s.acqRet, s.now = in.call, in.ret, t
		if in.grantBy > 0 {
			s.acqRet = in.grantBy
		}
	}
	return s
}

// reentered is s after its holder acquired again at lo. A nested call may
// refresh the lease (Redisson's does): acqCall stays the first grant's, the
// earliest the lease may expire, and acqRet moves to the latest return, the
// latest it may have been refreshed; both the lenient bound.
func (m lockModel) reentered(s lockState, in *lockOp, lo int64) lockState {
	s.depth++
	if s.owner == 0 {
		s.owner = in.owner
	}
	if m.lease {
		s.acqRet = max(s.acqRet, in.ret)
		s.now = lo
	}
	return s
}

// released is s after its holder released once at t.
func (m lockModel) released(s lockState, in *lockOp, t int64) lockState {
	if s.depth <= 1 {
		return m.free(t)
	}
	s.depth--
	if m.lease {
		s.acqRet = max(s.acqRet, in.ret)
		s.now = t
	}
	return s
}

func (m lockModel) free(t int64) lockState {
	if m.lease {
		return lockState{now: t}
	}
	return lockState{}
}

// step returns every state the lock can be in after in with outcome out
// from s; none when the step is impossible. The operation takes effect at a
// point p in [lo, in.ret], lo = max(s.now, in.call).
//
//   - acquire ok: the lock was free, or (lease) its holder's lease may have
//     expired by p: acqCall + TTL - slack <= p, or (reentrant) the client
//     owns it already: one level deeper.
//   - acquire failed (held): the lock was not free.
//   - release ok: the client owns the lock and (lease, not renewed) p <=
//     acqRet + TTL + slack, its lease not yet surely expired; free when the
//     last level goes.
//   - release failed (not-owner): the client does not own the lock, or
//     (lease) it does but its lease may have expired by p; then it is free.
//   - indeterminate: either no effect at all, or the effect of success.
func (m lockModel) step(s lockState, in *lockOp, out linOutcome) []lockState {
	return m.stepInto(nil, s, in, out)
}

// stepInto is step appending to dst.
func (m lockModel) stepInto(dst []lockState, s lockState, in *lockOp, out linOutcome) []lockState {
	lo := in.call
	if m.lease {
		lo = max(s.now, in.call)
		if lo > in.ret {
			return dst
		}
	}
	switch in.kind {
	case linAcquire:
		shared := m.rw && in.shared
		if out == outHeld {
			if s.held() {
				return append(dst, m.at(s, lo))
			}
			return dst
		}
		if out == outUnknown {
			dst = append(dst, s)
		}
		if shared {
			return m.readAcquire(dst, s, in, lo)
		}
		// take is the earliest point at which in can take the lock, or
		// false when it cannot by in.ret.
		take, can := lo, !s.held()
		if !can && m.lease {
			take = max(lo, m.expiryAll(s))
			can = take <= in.ret
		}
		if can {
			dst = append(dst, m.taken(in, take))
		}
		if m.reentrant && m.owns(s, in) {
			dst = append(dst, m.reentered(s, in, lo))
		}
		return dst
	case linRelease:
		if s.readers != 0 {
			return m.readRelease(dst, s, in, out, lo)
		}
		owns := m.owns(s, in)
		switch out {
		case outOK:
			if owns && (!m.lease || lo <= m.deadline(s)) {
				return append(dst, m.released(s, in, lo))
			}
		case outNotOwner:
			if !owns {
				return append(dst, m.at(s, lo))
			}
			if m.lease {
				if t := max(lo, m.expiry(s)); t <= in.ret {
					return append(dst, m.free(t))
				}
			}
		case outUnknown:
			dst = append(dst, s)
			if owns {
				dst = append(dst, m.released(s, in, lo))
			}
		}
	}
	return dst
}

// Read-write locks: a writer excludes everybody, readers share. A state has
// a writer (client) or readers, never both.
//
//   - read acquire ok: no writer, or (lease) the writer's lease may have
//     expired by p: it joins the readers. On a reentrant lock, a client
//     that owns a reader already nests on it instead.
//   - write acquire ok: nobody holds it, or (lease) every holder's lease may
//     have expired by p.
//   - acquire failed (held), read or write: somebody holds it. A reader
//     refused while only readers hold the lock is allowed: a
//     writer-preferring lock (Curator's) queues readers behind a waiting
//     writer, whom the state does not show; the readers-share property
//     reports whether readers did share.
//   - a release frees the hold, writer or reader, its client owns, as for
//     an exclusive lock, each reader with its own lease.

func (m lockModel) name() string {
	switch {
	case m.rw && m.lease && m.renews:
		return "renewed-lease read-write lock"
	case m.rw && m.lease:
		return "lease read-write lock"
	case m.rw:
		return "read-write lock"
	case m.lease && m.renews:
		return "renewed-lease mutex"
	case m.lease:
		return "lease mutex"
	}
	return "mutex"
}
