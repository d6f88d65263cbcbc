package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBase is what every single-instance Redis scheme shares: one client
// with no automatic retries (a retried SET NX after a lost reply would find
// the client's own key and report the lock as held by somebody else), one
// deadline per request, and the fencing counter beside the lock key.
type redisBase struct {
	cfg Config
	rdb *redis.Client
}

func newRedisBase(c Config) (*redisBase, error) {
	if len(c.Addrs) == 0 {
		return nil, errors.New("redis scheme needs a server address")
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Second
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:                  c.Addrs[0],
		MaxRetries:            -1,
		DialTimeout:           c.OpTimeout,
		ReadTimeout:           c.OpTimeout,
		WriteTimeout:          c.OpTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              2,
		Protocol:              2,
		DisableIdentity:       true,
	})
	return &redisBase{cfg: c, rdb: rdb}, nil
}

func (b *redisBase) Close() error { return b.rdb.Close() }

func (b *redisBase) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.cfg.OpTimeout)
}

func (b *redisBase) fenceKey() string { return b.cfg.Key + ":fence" }

func (b *redisBase) lease(owner string, start time.Time, token *int64, ttl time.Duration) Lease {
	l := Lease{Owner: owner, Token: token, Acquired: start}
	if ttl > 0 {
		l.ValidUntil = start.Add(ttl)
	}
	return l
}

// Acquire scripts. With fencing on, the token is an INCR of a counter in the
// same script as the SET, so a token is issued exactly when the lock is.
var (
	setNXPXFenced = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`)
	setNXFenced = redis.NewScript(`
if redis.call('SETNX', KEYS[1], ARGV[1]) == 1 then
  return redis.call('INCR', KEYS[2])
end
return false`)
	// compareAndDelete is the release of the Redis documentation.
	compareAndDelete = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
else
  return 0
end`)
	// lenientRelease treats a key that is not ours as already released.
	lenientRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 1`)
)

// setNX runs SET NX (with PX when ttl > 0, plain SETNX otherwise), fenced
// when configured.
func (b *redisBase) setNX(ctx context.Context, owner string, ttl time.Duration) (*int64, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	keys := []string{b.cfg.Key, b.fenceKey()}
	if b.cfg.Fence {
		var res any
		var err error
		if ttl > 0 {
			res, err = setNXPXFenced.Run(ctx, b.rdb, keys, owner, ttl.Milliseconds()).Result()
		} else {
			res, err = setNXFenced.Run(ctx, b.rdb, keys, owner).Result()
		}
		if errors.Is(err, redis.Nil) {
			return nil, ErrHeld
		}
		if err != nil {
			return nil, fmt.Errorf("acquire: %w", err)
		}
		tok, ok := res.(int64)
		if !ok {
			return nil, fmt.Errorf("acquire: unexpected reply %v", res)
		}
		return &tok, nil
	}
	var ok bool
	var err error
	if ttl > 0 {
		ok, err = b.rdb.SetNX(ctx, b.cfg.Key, owner, ttl).Result()
	} else {
		ok, err = b.rdb.SetNX(ctx, b.cfg.Key, owner, 0).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	if !ok {
		return nil, ErrHeld
	}
	return nil, nil
}

// plainDelete deletes the key whoever owns it. It is issued as GETDEL, which
// deletes exactly as DEL does and also tells whose key it deleted, so the
// history can show a foreign release. Like the naive code it models, it
// reports success whatever it deleted.
func (b *redisBase) plainDelete(ctx context.Context) (ReleaseResult, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	v, err := b.rdb.GetDel(ctx, b.cfg.Key).Result()
	if errors.Is(err, redis.Nil) {
		return ReleaseResult{Removed: "-"}, nil
	}
	if err != nil {
		return ReleaseResult{}, fmt.Errorf("release: %w", err)
	}
	return ReleaseResult{Removed: v}, nil
}

// setnx: SETNX, no TTL, DEL.
type setnx struct{ *redisBase }

func newSetNX(c Config) (Lock, error) {
	b, err := newRedisBase(c)
	return setnx{b}, err
}

func (s setnx) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	tok, err := s.setNX(ctx, owner, 0)
	if err != nil {
		return Lease{}, err
	}
	return s.lease(owner, start, tok, 0), nil
}

func (s setnx) Release(ctx context.Context, _ Lease) (ReleaseResult, error) {
	return s.plainDelete(ctx)
}

// setnxExpire: SETNX, then EXPIRE in a second round trip.
type setnxExpire struct{ *redisBase }

func newSetNXExpire(c Config) (Lock, error) {
	b, err := newRedisBase(c)
	return setnxExpire{b}, err
}

func (s setnxExpire) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	tok, err := s.setNX(ctx, owner, 0)
	if err != nil {
		return Lease{}, err
	}
	Gap(ctx, PointAfterSetNX)
	ectx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.rdb.PExpire(ectx, s.cfg.Key, s.cfg.TTL).Err(); err != nil {
		// The key is set without a TTL: whether it will ever expire is
		// unknown to the client, which treats the acquire as indeterminate.
		return Lease{}, fmt.Errorf("acquire: %w: set the key but EXPIRE failed: %w", ErrIndeterminate, err)
	}
	return s.lease(owner, start, tok, s.cfg.TTL), nil
}

func (s setnxExpire) Release(ctx context.Context, _ Lease) (ReleaseResult, error) {
	return s.plainDelete(ctx)
}

// del: SET NX PX, plain DEL.
type del struct{ *redisBase }

func newDel(c Config) (Lock, error) {
	b, err := newRedisBase(c)
	return del{b}, err
}

func (s del) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	tok, err := s.setNX(ctx, owner, s.cfg.TTL)
	if err != nil {
		return Lease{}, err
	}
	return s.lease(owner, start, tok, s.cfg.TTL), nil
}

func (s del) Release(ctx context.Context, _ Lease) (ReleaseResult, error) {
	return s.plainDelete(ctx)
}

// getDel: SET NX PX; release GET, compare the owner in the client, then
// delete (seed 001's "check, then delete": not atomic, the reason the
// textbook moves the compare into Lua). The delete is issued as GETDEL, as
// plainDelete's, so the server says whose key went.
type getDel struct{ del }

func newGetDel(c Config) (Lock, error) {
	b, err := newRedisBase(c)
	return getDel{del{b}}, err
}

func (s getDel) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	gctx, cancel := s.ctx(ctx)
	v, err := s.rdb.Get(gctx, s.cfg.Key).Result()
	cancel()
	switch {
	case errors.Is(err, redis.Nil):
		return ReleaseResult{Removed: "-"}, ErrNotOwner
	case err != nil:
		// GET changes nothing: whatever became of it, nothing was deleted.
		return ReleaseResult{Removed: "-"}, fmt.Errorf("release: %w: GET: %w", ErrRejected, err)
	case v != l.Owner:
		return ReleaseResult{Removed: "-"}, ErrNotOwner
	}
	Gap(ctx, PointAfterGet)
	// Ours a moment ago: delete, whatever the key holds by now.
	return s.plainDelete(ctx)
}

// lua: SET NX PX, Lua compare-and-delete.
type lua struct{ *redisBase }

func newLua(c Config) (Lock, error) {
	b, err := newRedisBase(c)
	return lua{b}, err
}

func (s lua) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	tok, err := s.setNX(ctx, owner, s.cfg.TTL)
	if err != nil {
		return Lease{}, err
	}
	return s.lease(owner, start, tok, s.cfg.TTL), nil
}

func (s lua) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := compareAndDelete.Run(ctx, s.rdb, []string{s.cfg.Key}, l.Owner).Int64()
	if err != nil {
		return ReleaseResult{}, fmt.Errorf("release: %w", err)
	}
	if n == 0 {
		return ReleaseResult{Removed: "-"}, ErrNotOwner
	}
	return ReleaseResult{Removed: l.Owner}, nil
}

// luaLenient: SET NX PX, Lua release that says 1 whatever it found.
type luaLenient struct{ lua }

func newLuaLenient(c Config) (Lock, error) {
	b, err := newRedisBase(c)
	return luaLenient{lua{b}}, err
}

func (s luaLenient) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := lenientRelease.Run(ctx, s.rdb, []string{s.cfg.Key}, l.Owner).Err(); err != nil {
		return ReleaseResult{}, fmt.Errorf("release: %w", err)
	}
	// The script's answer is 1 either way: the client cannot tell what it
	// removed, and neither can the history.
	return ReleaseResult{}, nil
}
