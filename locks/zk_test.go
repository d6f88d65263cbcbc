package locks_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/locks"
)

// startEnsemble starts a private zk3 or etcd3 topology, once per test
// binary run for each topology, stopped when the test ends.
func startEnsemble(tb testing.TB, topology string) clusters.Cluster {
	tb.Helper()
	if m := clusters.Missing(topology); len(m) > 0 {
		if os.Getenv("CI") != "" {
			tb.Fatalf("under CI: %v", clusters.MissingError(m))
		}
		tb.Skipf("%v", clusters.MissingError(m))
	}
	t0 := time.Now()
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: topology, Dir: tb.TempDir()})
	require.NoError(tb, err)
	tb.Logf("%s up in %s", topology, time.Since(t0).Round(time.Millisecond))
	tb.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

func newLockKey(tb testing.TB, s locks.Scheme, addrs []string, key string, client int, ttl time.Duration, fence bool) locks.Lock {
	tb.Helper()
	l, err := s.New(locks.Config{Addrs: addrs, Key: key, TTL: ttl, Fence: fence, OpTimeout: time.Second, Client: client})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = l.Close() })
	return l
}

func lookup(t *testing.T, name string) locks.Scheme {
	t.Helper()
	s, ok := locks.Lookup(name)
	require.True(t, ok, name)
	return s
}

// The conformance test over the ZooKeeper and etcd schemes on real
// ensembles: mutual exclusion, release, growing tokens, the lock freed when
// the holder's session ends, blocking waits, reentrance.
func TestZKEtcdConformance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters := map[string]clusters.Cluster{}
	parent := t
	for _, name := range []string{"zk", "zk-strict", "zk-semaphore", "zk-rw", "etcd"} {
		s := lookup(t, name)
		t.Run(name, func(t *testing.T) {
			cl, ok := clusters[s.Topology]
			if !ok {
				// Stopped when the whole test ends.
				cl = startEnsemble(parent, s.Topology)
				clusters[s.Topology] = cl
			}
			addrs := cl.Addrs()
			ttl := 2 * time.Second
			key := "conf-" + name
			a := newLockKey(t, s, addrs, key, 1, ttl, true)
			b := newLockKey(t, s, addrs, key, 2, ttl, true)

			la, err := a.Acquire(ctx)
			require.NoError(t, err)
			require.NotNil(t, la.Token)
			_, err = b.Acquire(ctx)
			requireRefused(t, err)
			if s.Reentrant {
				inner, err := a.Acquire(ctx)
				require.NoError(t, err, "reentrant")
				require.Equal(t, la.Owner, inner.Owner, "a nested acquire is part of the outer hold")
				_, err = a.Release(ctx, inner)
				require.NoError(t, err)
				_, err = b.Acquire(ctx)
				requireRefused(t, err, "still held after the inner release")
			} else {
				_, err = a.Acquire(ctx)
				require.ErrorIs(t, err, locks.ErrHeld, "not reentrant")
			}
			_, err = a.Release(ctx, la)
			require.NoError(t, err)
			lb, err := b.Acquire(ctx)
			require.NoError(t, err)
			require.Greater(t, *lb.Token, *la.Token, "tokens grow")

			// Blocking: c waits until b releases.
			c := locks.Blocking(newLockKey(t, s, addrs, key, 3, ttl, true), 50*time.Millisecond, 5*time.Second, nil)
			go func() {
				time.Sleep(300 * time.Millisecond)
				_, _ = b.Release(ctx, lb)
			}()
			t0 := time.Now()
			lc, err := c.Acquire(ctx)
			require.NoError(t, err)
			require.GreaterOrEqual(t, time.Since(t0), 250*time.Millisecond)
			require.Greater(t, *lc.Token, *lb.Token)

			// The holder's session ends without a release (Close drops the
			// connection; for etcd the lease is left to expire): the lock
			// frees by itself.
			require.NoError(t, c.Close())
			d := locks.Blocking(newLockKey(t, s, addrs, key, 4, ttl, true), 50*time.Millisecond, 3*ttl, nil)
			t0 = time.Now()
			_, err = d.Acquire(ctx)
			require.NoError(t, err)
			t.Logf("%s: lock free %s after the holder's session ended", name, time.Since(t0).Round(time.Millisecond))
		})
	}
}

func TestZKReadWrite(t *testing.T) {
	t.Parallel()
	cl := startEnsemble(t, "zk3")
	ctx := context.Background()
	s := lookup(t, "zk-rw")
	require.True(t, s.ReadWrite)
	mk := func(c int) locks.ModeLock {
		l := newLockKey(t, s, cl.Addrs(), "rw", c, 2*time.Second, true)
		return l.(locks.ModeLock)
	}
	r1, r2, w := mk(1), mk(2), mk(3)
	l1, err := r1.AcquireMode(ctx, locks.ModeRead)
	require.NoError(t, err)
	l2, err := r2.AcquireMode(ctx, locks.ModeRead)
	require.NoError(t, err, "readers share")
	_, err = w.AcquireMode(ctx, locks.ModeWrite)
	requireRefused(t, err, "a writer waits for the readers")
	_, err = r1.(locks.Lock).Release(ctx, l1)
	require.NoError(t, err)
	_, err = r2.(locks.Lock).Release(ctx, l2)
	require.NoError(t, err)
	lw, err := w.AcquireMode(ctx, locks.ModeWrite)
	require.NoError(t, err)
	_, err = r1.AcquireMode(ctx, locks.ModeRead)
	requireRefused(t, err, "a writer excludes readers")
	_, err = w.(locks.Lock).Release(ctx, lw)
	require.NoError(t, err)
}

// zk-strict loses its lock when the ensemble goes silent for 2/3 of the
// session timeout; zk keeps believing.
func TestZKStrictLoses(t *testing.T) {
	t.Parallel()
	cl := startEnsemble(t, "zk3")
	ctx := context.Background()
	strict := newLockKey(t, lookup(t, "zk-strict"), cl.Addrs(), "strict", 1, 1500*time.Millisecond, false)
	plain := newLockKey(t, lookup(t, "zk"), cl.Addrs(), "plain", 2, 1500*time.Millisecond, false)
	_, err := strict.Acquire(ctx)
	require.NoError(t, err)
	_, err = plain.Acquire(ctx)
	require.NoError(t, err)
	lost, why := strict.(locks.Loser).Lost()
	require.False(t, lost, why)
	for _, n := range cl.Nodes() {
		require.NoError(t, n.Pause())
	}
	t0 := time.Now()
	for {
		if lost, why = strict.(locks.Loser).Lost(); lost || time.Since(t0) > 3*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, n := range cl.Nodes() {
		require.NoError(t, n.Resume())
	}
	require.True(t, lost)
	t.Logf("zk-strict: lock lost %s after the ensemble froze: %s", time.Since(t0).Round(time.Millisecond), why)
	lost, _ = plain.(locks.Loser).Lost()
	require.False(t, lost, "plain zk keeps believing")
}

// BenchmarkZKEtcdAcquireRelease measures one client's uncontended
// acquire+release cycle on the real ensembles. A zk cycle is three round
// trips (create, children, delete), zk-semaphore's nine; etcd's two (the
// transaction, the delete).
func BenchmarkZKEtcdAcquireRelease(b *testing.B) {
	ctx := context.Background()
	started := map[string]clusters.Cluster{}
	for _, name := range []string{"zk", "zk-semaphore", "zk-rw", "etcd"} {
		s, _ := locks.Lookup(name)
		cl, ok := started[s.Topology]
		if !ok {
			cl = startEnsemble(b, s.Topology)
			started[s.Topology] = cl
		}
		b.Run(name, func(b *testing.B) {
			l := newLockKey(b, s, cl.Addrs(), "bench-"+name, 1, 10*time.Second, true)
			if _, err := l.Acquire(ctx); err != nil { // warm the session
				b.Fatal(err)
			}
			_, _ = l.Release(ctx, locks.Lease{})
			benchCycles(b, ctx, l)
		})
	}
}
