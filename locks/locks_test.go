package locks_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/workloads"
)

// startRedis starts a private redis-server for one test.
func startRedis(tb testing.TB) clusters.Cluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redis-server not installed under CI: %v", err)
		}
		tb.Skip("redis-server not installed: run scripts/install.sh (apt-get install -y redis-server)")
	}
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: "redis", Dir: tb.TempDir()})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

func newLock(tb testing.TB, s locks.Scheme, addr string, client int, ttl time.Duration, fence bool) locks.Lock {
	tb.Helper()
	return newLockOn(tb, s, []string{addr}, client, ttl, fence)
}

// newLockOn is newLock on several addresses (e.g. the sentinels).
func newLockOn(tb testing.TB, s locks.Scheme, addrs []string, client int, ttl time.Duration, fence bool) locks.Lock {
	tb.Helper()
	l, err := s.New(locks.Config{Server: workloads.ServerSettings(), Addrs: addrs, Key: "k:" + s.Name, TTL: ttl, Fence: fence, OpTimeout: time.Second, Client: client})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = l.Close() })
	return l
}

// Every scheme through the same conformance test: mutual exclusion while
// held, release by the holder, fencing tokens that grow, and what happens
// after the lease ran out.
func TestConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One cluster per topology, started when a scheme first needs it and
	// stopped when the whole test ends.
	started := map[string]clusters.Cluster{}
	parent := t
	addrs := func(topology string) []string {
		if cl, ok := started[topology]; ok {
			return cl.Addrs()
		}
		var cl clusters.Cluster
		if topology == "redis-sentinel" {
			cl = startSentinel(parent)
		} else {
			cl = startRedis(parent)
		}
		started[topology] = cl
		return cl.Addrs()
	}
	for _, s := range locks.Schemes {
		if s.Topology != "redis" && s.Topology != "redis-sentinel" {
			continue // schemes on other topologies have their own tests
		}
		t.Run(s.Name, func(t *testing.T) {
			ttl := 300 * time.Millisecond
			addr := addrs(s.Topology)
			a := newLockOn(t, s, addr, 1, ttl, true)
			b := newLockOn(t, s, addr, 2, ttl, true)

			la, err := a.Acquire(ctx)
			require.NoError(t, err)
			require.NotEmpty(t, la.Owner)
			require.NotNil(t, la.Token, "fenced acquire gives a token")
			_, err = b.Acquire(ctx)
			require.ErrorIs(t, err, locks.ErrHeld)
			typ, reason := locks.Classify(err)
			require.Equal(t, history.Fail, typ)
			require.Equal(t, history.ReasonHeld, reason)

			res, err := a.Release(ctx, la)
			require.NoError(t, err)
			if res.Removed != "" {
				require.Equal(t, la.Owner, res.Removed)
			}
			lb, err := b.Acquire(ctx)
			require.NoError(t, err)
			require.Greater(t, *lb.Token, *la.Token, "tokens grow")
			require.NotEqual(t, la.Owner, lb.Owner)

			// After the lease: schemes with expiry let another client in,
			// unless a watchdog renews the lease while its holder runs.
			time.Sleep(ttl + 100*time.Millisecond)
			lc, err := a.Acquire(ctx)
			if s.Name == "redisson" {
				require.ErrorIs(t, err, locks.ErrHeld, "the watchdog keeps b's lease alive past the TTL")
				res, err = b.Release(ctx, lb)
				require.NoError(t, err)
				require.Equal(t, lb.Owner, res.Removed)
				return
			}
			if !s.Lease {
				require.ErrorIs(t, err, locks.ErrHeld, "a lock without TTL never expires")
				return
			}
			require.NoError(t, err, "the lease expired, the lock is free")

			// b's release now meets a's key: each scheme's own answer.
			res, err = b.Release(ctx, lb)
			switch s.Name {
			case "redis-lua", "redis-sentinel", "redis-get-del": // compare, then delete: not ours, nothing deleted
				require.ErrorIs(t, err, locks.ErrNotOwner)
				require.Equal(t, "-", res.Removed)
			case "redis-lua-lenient":
				require.NoError(t, err, "the lenient release says ok")
			default: // plain DEL: removes a's key and says so
				require.NoError(t, err)
				require.Equal(t, lc.Owner, res.Removed)
			}
		})
	}
}

func TestDefiniteAndIndeterminateErrors(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	ctx := context.Background()
	s, _ := locks.Lookup("redis-lua")

	// Nobody listens: connection refused is a definite failure.
	dead := newLock(t, s, "127.0.0.1:1", 1, time.Second, false)
	_, err := dead.Acquire(ctx)
	typ, reason := locks.Classify(err)
	require.Equal(t, history.Fail, typ, "err: %v", err)
	require.Equal(t, history.ReasonError, reason)

	// A frozen server: the request was sent, the outcome is unknown.
	l, err := s.New(locks.Config{Server: workloads.ServerSettings(), Addrs: cl.Addrs(), Key: "k", TTL: time.Second, OpTimeout: 200 * time.Millisecond, Client: 1})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Acquire(ctx) // warm the connection
	require.NoError(t, err)
	n := cl.Nodes()[0]
	require.NoError(t, n.Pause())
	defer func() { _ = n.Resume() }()
	_, err = l.Acquire(ctx)
	require.Error(t, err)
	typ, _ = locks.Classify(err)
	require.Equal(t, history.Info, typ, "err: %v", err)
}

func TestBlockingWaitsForRelease(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	ctx := context.Background()
	s, _ := locks.Lookup("redis-lua")
	a := newLock(t, s, cl.Addrs()[0], 1, 5*time.Second, false)
	b := locks.Blocking(newLock(t, s, cl.Addrs()[0], 2, 5*time.Second, false), 20*time.Millisecond, 2*time.Second, nil)
	la, err := a.Acquire(ctx)
	require.NoError(t, err)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = a.Release(ctx, la)
	}()
	start := time.Now()
	_, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	// And gives up with ErrHeld when the lock never frees.
	c := locks.Blocking(newLock(t, s, cl.Addrs()[0], 3, 5*time.Second, false), 20*time.Millisecond, 300*time.Millisecond, nil)
	_, err = c.Acquire(ctx)
	require.ErrorIs(t, err, locks.ErrHeld)
}

func TestRedlock(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		startRedis(t) // skips or fails as every server test does
	}
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: "redis5", Dir: t.TempDir()})
	require.NoError(t, err)
	defer cl.Stop(context.Background())
	s, ok := locks.Lookup("redlock")
	require.True(t, ok)
	ctx := context.Background()
	mk := func(client int) locks.Lock {
		l, err := s.New(locks.Config{Server: workloads.ServerSettings(), Addrs: cl.Addrs(), Key: "rl", TTL: 2 * time.Second, OpTimeout: time.Second, Client: client})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b := mk(1), mk(2)
	var la locks.Lease
	var t0, t1 time.Time
	acquireAnswered(t, func() (err error) {
		t0 = time.Now()
		la, err = a.Acquire(ctx)
		t1 = time.Now()
		return err
	})
	// Every master granted, or (a busy machine) a majority.
	require.GreaterOrEqual(t, len(la.Nodes), 3)
	// Valid for the TTL less the drift (TTL/100 + 2 ms) from the acquire's
	// start, however long the acquire took (a busy machine's is slow).
	validity := 2*time.Second - (2*time.Second/100 + 2*time.Millisecond)
	require.False(t, la.ValidUntil.Before(t0.Add(validity)) || la.ValidUntil.After(t1.Add(validity)),
		"valid until %s, want %s after a start within [%s, %s]", la.ValidUntil, validity, t0, t1)
	_, err = b.Acquire(ctx)
	if !errors.Is(err, locks.ErrIndeterminate) { // (too slow to tell: not granted either)
		requireRefused(t, err)
	}

	// Two of five masters down: a majority still decides.
	require.NoError(t, cl.Nodes()[0].Kill())
	require.NoError(t, cl.Nodes()[1].Kill())
	_, err = a.Release(ctx, la)
	require.NoError(t, err)
	var lb locks.Lease
	acquireAnswered(t, func() (err error) { lb, err = b.Acquire(ctx); return err })
	require.Len(t, lb.Nodes, 3)
	// Three down: no majority, and a definite failure.
	require.NoError(t, cl.Nodes()[2].Kill())
	_, err = a.Acquire(ctx)
	require.Error(t, err)

	_, err = s.New(locks.Config{Server: workloads.ServerSettings(), Addrs: cl.Addrs(), Fence: true, TTL: time.Second})
	require.ErrorContains(t, err, "no fencing token")
}

// acquireAnswered runs acquire (a Redlock acquire with a 2 s TTL) until
// the masters answer in time: Redlock's per-node timeout is 50 ms, which a
// busy machine's first connections can miss, and then nothing is granted
// (outcome unknown, or contended when the keys of the attempt before are
// still there). Each retry waits for those keys to expire. Five attempts
// at most.
func acquireAnswered(t *testing.T, acquire func() error) {
	t.Helper()
	var err error
	for range 5 {
		if err = acquire(); err == nil || !errors.Is(err, locks.ErrIndeterminate) && !errors.Is(err, locks.ErrContended) {
			break
		}
		t.Logf("the masters did not answer in time (%v): again once the attempt's keys expired", err)
		time.Sleep(2100 * time.Millisecond)
	}
	require.NoError(t, err)
}

// requireRefused checks a failed try-lock: held by somebody, or contended
// (a try-lock that cannot tell).
func requireRefused(t *testing.T, err error, msg ...any) {
	t.Helper()
	require.True(t, errors.Is(err, locks.ErrHeld) || errors.Is(err, locks.ErrContended), "want a refused acquire, got %v %v", err, msg)
}
