package locks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisson is Redisson's RLock (RedissonLock, 3.x) as Redisson writes it: the
// lock is a hash {owner: count} whose owner is the client instance's UUID
// and the thread's id ("uuid:threadId"), taken and re-entered with HINCRBY +
// PEXPIRE in one Lua script, released by counting down and deleting at zero,
// which also publishes an unlock message on the lock's channel. While the
// lock is held, a watchdog renews the lease every TTL/3 (Redisson:
// lockWatchdogTimeout/3), as long as the holder's field is still there. The
// watchdog runs inside the client process: a frozen process renews nothing.
//
// The owner written into Redis is the same for every acquire of one client
// (Redisson's thread is one per client process here). The lease handed back
// (Lease.Owner) is that owner plus the number of the outer acquire
// ("uuid:1:7"), so the history tells holds apart; a nested acquire returns
// the lease of the hold it re-enters.
//
// With fencing on, an outer acquire also increments a counter in the same
// script (as RFencedLock does) and a nested one returns the current value.
type redisson struct {
	*redisBase
	field   string // "uuid:threadId", the hash field this client writes
	channel string // where unlocks are published

	// Redisson's renewal entry: how many times this client holds the lock,
	// the hold's lease, and the running watchdog.
	depth   int
	hold    Lease
	outer   int // outer acquires so far
	stopDog context.CancelFunc
	dogDone chan struct{}
	dogMu   sync.Mutex // stopDog, dogDone: Close may run beside a release
}

// Redisson's scripts (RedissonLock.tryLockInnerAsync, unlockInnerAsync,
// renewExpirationAsync). A successful acquire returns nil; a refused one
// the lock's remaining time to live in ms.
var (
	redissonAcquire = redis.NewScript(`
if (redis.call('exists', KEYS[1]) == 0) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
return redis.call('pttl', KEYS[1]);`)
	// redissonAcquireFenced returns {1, token} when granted, {0, pttl}
	// when not; only an outer acquire issues a new token.
	redissonAcquireFenced = redis.NewScript(`
if (redis.call('exists', KEYS[1]) == 0) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return {1, redis.call('incr', KEYS[2])};
end;
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return {1, tonumber(redis.call('get', KEYS[2]) or '0')};
end;
return {0, redis.call('pttl', KEYS[1])};`)
	// redissonRelease returns nil when the field is not there, 0 when the
	// count went down but the lock is still held, 1 when it was deleted.
	redissonRelease = redis.NewScript(`
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call('publish', KEYS[2], ARGV[1]);
  return 1;
end;
return nil;`)
	redissonRenew = redis.NewScript(`
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return 1;
end;
return 0;`)
)

// redissonUnlockMessage is what an unlock publishes (LockPubSub.UNLOCK_MESSAGE).
const redissonUnlockMessage = 0

// redissonThread is the thread id in the owner field: one serving thread
// per client process.
const redissonThread = 1

func newRedisson(c Config) (Lock, error) {
	if c.TTL <= 0 {
		return nil, errors.New("redisson needs a TTL (the watchdog renews every TTL/3)")
	}
	b, err := newRedisBase(c)
	if err != nil {
		return nil, err
	}
	r := c.Rand
	if r == nil {
		r = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(ownerSeq.Add(1))))
	}
	return &redisson{
		redisBase: b,
		field:     newUUID(r) + ":" + strconv.Itoa(redissonThread),
		channel:   "redisson_lock__channel:{" + c.Key + "}",
	}, nil
}

// newUUID draws a version-4 UUID from r (Redisson's client id is a random
// UUID; here it is seeded).
func newUUID(r *rand.Rand) string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Acquire tries once (RLock.tryLock()), re-entering when this client holds
// the lock already.
func (s *redisson) Acquire(ctx context.Context) (Lease, error) {
	l, _, err := s.try(ctx)
	return l, err
}

// try runs the acquire script once. When the lock is held by another
// client, the error wraps ErrHeld and pttl is the lock's remaining time to
// live (-1 for a key without one).
func (s *redisson) try(ctx context.Context) (Lease, time.Duration, error) {
	start := s.cfg.clock().Now()
	ttl := s.cfg.TTL.Milliseconds()
	keys := []string{s.cfg.Key, s.fenceKey()}
	rctx, cancel := s.ctx(ctx)
	defer cancel()
	var token *int64
	if s.cfg.Fence {
		v, err := redissonAcquireFenced.Run(rctx, s.rdb, keys, ttl, s.field).Int64Slice()
		if err != nil {
			return Lease{}, 0, fmt.Errorf("acquire: %w", err)
		}
		if len(v) != 2 {
			return Lease{}, 0, fmt.Errorf("acquire: %w: unexpected reply %v", ErrIndeterminate, v)
		}
		if v[0] != 1 {
			return Lease{}, time.Duration(v[1]) * time.Millisecond, fmt.Errorf("%w (expires in %dms)", ErrHeld, v[1])
		}
		token = &v[1]
	} else {
		pttl, err := redissonAcquire.Run(rctx, s.rdb, keys[:1], ttl, s.field).Int64()
		if err == nil {
			return Lease{}, time.Duration(pttl) * time.Millisecond, fmt.Errorf("%w (expires in %dms)", ErrHeld, pttl)
		}
		if !errors.Is(err, redis.Nil) {
			return Lease{}, 0, fmt.Errorf("acquire: %w", err)
		}
	}
	// Granted (Redisson: scheduleExpirationRenewal).
	s.depth++
	if s.depth == 1 {
		s.outer++
		s.hold = s.lease(fmt.Sprintf("%s:%d", s.field, s.outer), start, token, s.cfg.TTL)
		s.startWatchdog()
	}
	l := s.hold
	l.Acquired = start
	l.ValidUntil = start.Add(s.cfg.TTL)
	if token != nil {
		l.Token = token
	}
	return l, 0, nil
}

// Release counts down once (RLock.unlock()). As Redisson does, it takes
// the hold off the watchdog whatever the server answered: after the last
// release of a hold, renewal stops even if the release failed.
func (s *redisson) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	rctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := redissonRelease.Run(rctx, s.rdb, []string{s.cfg.Key, s.channel},
		redissonUnlockMessage, s.cfg.TTL.Milliseconds(), s.field).Int64()
	if s.depth > 0 {
		s.depth--
		if s.depth == 0 {
			s.stopWatchdog(false)
		}
	}
	switch {
	case errors.Is(err, redis.Nil):
		// Redisson: IllegalMonitorStateException, not locked by this thread.
		return ReleaseResult{Removed: "-"}, ErrNotOwner
	case err != nil:
		return ReleaseResult{}, fmt.Errorf("release: %w", err)
	case v == 0:
		// Counted down, still held: nothing deleted. ("-" would say the key
		// was gone, which it is not.)
		return ReleaseResult{}, nil
	}
	return ReleaseResult{Removed: l.Owner}, nil
}

// Redisson's command retries (Config retryAttempts 3, retryInterval
// 1500 ms against the 30 s lockWatchdogTimeout, scaled to the TTL): the
// watchdog before 3.44 gives up once a renewal failed through them.
const (
	redissonRetries       = 3
	redissonRetryInterval = 20 // TTL/20
)

// startWatchdog renews the lease every TTL/3 until the last release or until
// the field is gone (the renewal script answers 0). A renewal that fails is
// logged and the next one scheduled TTL/3 later (Redisson >= 3.44,
// RenewalTask); with --param redisson-watchdog=pre-3.44 the watchdog gives
// up once a renewal failed through Redisson's command retries
// (RedissonBaseLock.renewExpiration before 3.44: "Can't update lock
// expiration", EXPIRATION_RENEWAL_MAP.remove).
func (s *redisson) startWatchdog() {
	s.stopWatchdog(false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.dogMu.Lock()
	s.stopDog, s.dogDone = cancel, done
	s.dogMu.Unlock()
	every := s.cfg.TTL / 3
	giveUp := isVariant(s.cfg, "redisson-watchdog", "pre-3.44")
	go func() {
		defer close(done)
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ok, err := s.renew(ctx)
			switch {
			case err != nil && giveUp:
				return
			case err == nil && ok != 1:
				// The field is gone: nothing left to renew.
				return
			}
			// The next renewal is scheduled once this one has completed
			// (failed or not, since 3.44).
			t.Reset(every)
		}
	}()
}

// renew runs the renewal script once; before 3.44 the command's own
// retries come with it.
func (s *redisson) renew(ctx context.Context) (int64, error) {
	tries := 1
	if isVariant(s.cfg, "redisson-watchdog", "pre-3.44") {
		tries += redissonRetries
	}
	var err error
	for i := 0; i < tries; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(s.cfg.TTL / redissonRetryInterval):
			}
		}
		rctx, cancel := s.ctx(ctx)
		var ok int64
		ok, err = redissonRenew.Run(rctx, s.rdb, []string{s.cfg.Key}, s.cfg.TTL.Milliseconds(), s.field).Int64()
		cancel()
		if err == nil {
			return ok, nil
		}
	}
	return 0, err
}

// stopWatchdog cancels the renewal; with wait, it also waits until the
// watchdog goroutine has ended.
func (s *redisson) stopWatchdog(wait bool) {
	s.dogMu.Lock()
	stop, done := s.stopDog, s.dogDone
	s.stopDog, s.dogDone = nil, nil
	s.dogMu.Unlock()
	if stop == nil {
		return
	}
	stop()
	if wait {
		<-done
	}
}

// Close stops the watchdog and drops the connections.
func (s *redisson) Close() error {
	s.stopWatchdog(true)
	return s.redisBase.Close()
}

// Wait returns the lock with Redisson's blocking acquire (RLock.tryLock
// with a wait time): try; when the lock is held, subscribe to its channel
// and try again on each unlock message or after the lock's remaining time
// to live, whichever comes first, until timeout.
func (s *redisson) Wait(timeout time.Duration) Lock {
	return &redissonWait{redisson: s, timeout: timeout}
}

type redissonWait struct {
	*redisson
	timeout time.Duration
}

func (w *redissonWait) Acquire(ctx context.Context) (Lease, error) {
	deadline := time.Now().Add(w.timeout)
	l, _, err := w.try(ctx)
	if !errors.Is(err, ErrHeld) {
		return l, err
	}
	// The subscription keeps ctx for its reconnects; the confirmation
	// gets one request's deadline.
	sub := w.rdb.Subscribe(ctx, w.channel)
	defer sub.Close()
	// Wait for the subscription to be in place, so no unlock after the
	// next try can be missed.
	rctx, cancel := w.ctx(ctx)
	_, serr := sub.Receive(rctx)
	cancel()
	if serr != nil {
		// Nothing was changed: the lock was held and stays untaken.
		return Lease{}, fmt.Errorf("wait: subscribe to %s: %v: %w", w.channel, serr, err)
	}
	msgs := sub.Channel()
	tries, wakes := 1, 0
	for {
		tries++
		l, pttl, err := w.try(ctx)
		if !errors.Is(err, ErrHeld) {
			return l, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return Lease{}, fmt.Errorf("gave up after %d tries (%d unlock messages) in %s: %w", tries, wakes, w.timeout, err)
		}
		wait := left
		if pttl >= 0 && pttl < left {
			wait = pttl
		}
		t := time.NewTimer(wait)
		select {
		case <-msgs:
			wakes++
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Lease{}, fmt.Errorf("gave up after %d tries: %w (%w)", tries, err, ctx.Err())
		}
		t.Stop()
	}
}
