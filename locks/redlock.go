package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/history"
)

// redlock is the Redlock algorithm of the Redis documentation over N
// independent masters:
//
//   - acquire: SET key id NX PX ttl on every node in parallel, each with a
//     per-node timeout much smaller than the TTL; the lock is taken when a
//     majority agreed and the time spent is less than the TTL; its validity
//     is TTL - elapsed - drift, drift = TTL/100 + 2 ms (the clock drift
//     factor); on failure it releases on every node;
//   - release: Lua compare-and-delete on every node.
//
// The client checks its validity: once it has passed it stops using the
// resource. As go-redsync (Mutex.Until) it measures on Go's monotonic
// clock, which a wall-clock step does not move; --param redlock-clock=wall
// measures on the wall clock, as Redis's description and the ports that
// read Date.now() or currentTimeMillis do. Redlock has no fencing token.
type redlock struct {
	cfg     Config
	nodes   []*redis.Client
	addrs   []string
	quorum  int
	timeout time.Duration // per node
	// wall: validity on the wall clock (--param redlock-clock=wall).
	wall bool
}

func newRedlock(c Config) (Lock, error) {
	if len(c.Addrs) < 3 {
		return nil, fmt.Errorf("redlock needs at least 3 independent masters, got %d", len(c.Addrs))
	}
	if c.Fence {
		return nil, errors.New("redlock has no fencing token")
	}
	per := c.TTL / 20
	if per > 50*time.Millisecond {
		per = 50 * time.Millisecond
	}
	if per < 5*time.Millisecond {
		per = 5 * time.Millisecond
	}
	if c.OpTimeout > 0 && per > c.OpTimeout {
		per = c.OpTimeout
	}
	r := &redlock{cfg: c, addrs: c.Addrs, quorum: len(c.Addrs)/2 + 1, timeout: per, wall: isVariant(c, "redlock-clock", "wall")}
	for _, a := range c.Addrs {
		r.nodes = append(r.nodes, redis.NewClient(&redis.Options{
			Addr: a, MaxRetries: -1, DialTimeout: per, ReadTimeout: per, WriteTimeout: per,
			ContextTimeoutEnabled: true, PoolSize: 2, Protocol: 2, DisableIdentity: true,
		}))
	}
	return r, nil
}

func (r *redlock) Close() error {
	var errs []error
	for _, n := range r.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// nodeResult is one node's answer: ok, a definite refusal, or unknown.
type nodeResult struct {
	ok, definite bool
	err          error
}

// each runs f on every node in parallel with the per-node timeout.
func (r *redlock) each(ctx context.Context, f func(context.Context, *redis.Client) (bool, error)) []nodeResult {
	out := make([]nodeResult, len(r.nodes))
	var wg sync.WaitGroup
	for i, n := range r.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, r.timeout)
			defer cancel()
			ok, err := f(nctx, n)
			t, _ := Classify(err)
			out[i] = nodeResult{ok: ok && err == nil, definite: err == nil || t == history.Fail, err: err}
		}()
	}
	wg.Wait()
	return out
}

func (r *redlock) Acquire(ctx context.Context) (Lease, error) {
	// go-redsync measures the acquire and the validity with time.Now()
	// and Sub, on Go's monotonic clock; the wall-clock variant (Redis's
	// description, node-redlock's Date.now()) reads the client's wall
	// clock, which a clock step moves.
	var clock Clock = realClock{}
	if r.wall {
		clock = r.cfg.clock()
	}
	owner := newOwner(r.cfg)
	start := clock.Now()
	res := r.each(ctx, func(ctx context.Context, n *redis.Client) (bool, error) {
		return n.SetNX(ctx, r.cfg.Key, owner, r.cfg.TTL).Result()
	})
	elapsed := clock.Now().Sub(start)
	drift := r.cfg.TTL/100 + 2*time.Millisecond
	validity := r.cfg.TTL - elapsed - drift
	var granted []string
	unknown := 0
	for i, x := range res {
		if x.ok {
			granted = append(granted, r.addrs[i])
		} else if !x.definite {
			unknown++
		}
	}
	if len(granted) >= r.quorum && validity > 0 {
		return Lease{Owner: owner, Acquired: start, ValidUntil: start.Add(r.cfg.TTL - drift), Monotonic: !r.wall, Nodes: granted}, nil
	}
	// Failed: give back whatever was taken, on every node (a timed-out SET
	// may have been applied).
	rel := r.release(ctx, owner)
	cleaned := true
	for i, x := range res {
		if !x.definite && !rel[i].definite {
			cleaned = false
		}
	}
	switch {
	case !cleaned:
		return Lease{}, fmt.Errorf("%w: %d of %d nodes agreed, %d did not answer and could not be cleaned", ErrIndeterminate, len(granted), len(r.nodes), unknown)
	case len(granted) >= r.quorum:
		return Lease{}, fmt.Errorf("%w: majority reached but %s of the %s TTL was spent", ErrContended, elapsed.Round(time.Millisecond), r.cfg.TTL)
	case unknown == len(r.nodes):
		return Lease{}, fmt.Errorf("no node answered: %w", res[0].err)
	}
	// Nodes that refused may hold another client's partial grant that is
	// about to be released (a split vote): nobody need hold the lock.
	return Lease{}, fmt.Errorf("%w: only %d of %d nodes agreed (%d needed)", ErrContended, len(granted), len(r.nodes), r.quorum)
}

func (r *redlock) release(ctx context.Context, owner string) []nodeResult {
	return r.each(ctx, func(ctx context.Context, n *redis.Client) (bool, error) {
		v, err := compareAndDelete.Run(ctx, n, []string{r.cfg.Key}, owner).Int64()
		return v == 1, err
	})
}

// Release deletes the key on every node where it is still ours. It reports
// success when a majority deleted it, ErrNotOwner when every node answered
// and fewer did, and an indeterminate error otherwise.
func (r *redlock) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	res := r.release(ctx, l.Owner)
	deleted, unknown := 0, 0
	for _, x := range res {
		if x.ok {
			deleted++
		} else if !x.definite {
			unknown++
		}
	}
	switch {
	case deleted >= r.quorum:
		return ReleaseResult{}, nil
	case unknown == 0:
		return ReleaseResult{}, fmt.Errorf("%w: deleted on %d of %d nodes", ErrNotOwner, deleted, len(r.nodes))
	}
	return ReleaseResult{}, fmt.Errorf("%w: deleted on %d of %d nodes, %d did not answer", ErrIndeterminate, deleted, len(r.nodes), unknown)
}
