package locks_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/locks"
)

// TestMain lets the test binary double as a lock holder in its own process,
// so a test can freeze the holder, watchdog and all, with SIGSTOP.
func TestMain(m *testing.M) {
	if addr := os.Getenv("LOCKTEST_REDISSON_HOLDER"); addr != "" {
		if err := redissonHolder(addr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// redissonHolder takes the redisson lock, says so on stdout and holds it
// until its stdin closes.
func redissonHolder(addr string) error {
	ttl, err := time.ParseDuration(os.Getenv("LOCKTEST_TTL"))
	if err != nil {
		return err
	}
	s, _ := locks.Lookup("redisson")
	l, err := s.New(locks.Config{Addrs: []string{addr}, Key: "k:redisson", TTL: ttl, OpTimeout: time.Second, Client: 9})
	if err != nil {
		return err
	}
	defer l.Close()
	lease, err := l.Acquire(context.Background())
	if err != nil {
		return err
	}
	fmt.Println("acquired", lease.Owner)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// startSentinel starts a master, two replicas and three sentinels.
func startSentinel(tb testing.TB) clusters.Cluster {
	tb.Helper()
	if m := clusters.Missing("redis-sentinel"); len(m) > 0 {
		if os.Getenv("CI") != "" {
			tb.Fatalf("not installed under CI: %v", clusters.MissingError(m))
		}
		tb.Skipf("%v", clusters.MissingError(m))
	}
	start := time.Now()
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: "redis-sentinel", Dir: tb.TempDir()})
	require.NoError(tb, err)
	tb.Logf("redis-sentinel topology up in %s", time.Since(start).Round(time.Millisecond))
	tb.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

func rawClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Acquire twice, release twice: another client gets in only after the
// second release; the nested acquire re-enters the same hold.
func TestRedissonReentrant(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	ctx := context.Background()
	s, _ := locks.Lookup("redisson")
	a := newLock(t, s, cl.Addrs()[0], 1, 2*time.Second, true)
	b := newLock(t, s, cl.Addrs()[0], 2, 2*time.Second, true)

	outer, err := a.Acquire(ctx)
	require.NoError(t, err)
	inner, err := a.Acquire(ctx)
	require.NoError(t, err, "the holder re-enters")
	require.Equal(t, outer.Owner, inner.Owner, "one hold, one owner")
	require.Equal(t, *outer.Token, *inner.Token, "a nested acquire issues no new token")
	count, err := rawClient(t, cl.Addrs()[0]).HGetAll(ctx, "k:redisson").Result()
	require.NoError(t, err)
	require.Len(t, count, 1)
	for field, n := range count {
		require.Equal(t, "2", n, "HINCRBY counted both acquires")
		require.True(t, strings.HasPrefix(outer.Owner, field+":"), "lease owner %q extends the hash field %q", outer.Owner, field)
	}
	_, err = b.Acquire(ctx)
	require.ErrorIs(t, err, locks.ErrHeld)

	res, err := a.Release(ctx, inner)
	require.NoError(t, err)
	require.Empty(t, res.Removed, "counted down, nothing deleted")
	_, err = b.Acquire(ctx)
	require.ErrorIs(t, err, locks.ErrHeld, "one release of two: still held")

	res, err = a.Release(ctx, outer)
	require.NoError(t, err)
	require.Equal(t, outer.Owner, res.Removed)
	lb, err := b.Acquire(ctx)
	require.NoError(t, err)
	require.Greater(t, *lb.Token, *outer.Token)

	// A third release finds the lock not ours.
	res, err = a.Release(ctx, outer)
	require.ErrorIs(t, err, locks.ErrNotOwner)
	require.Equal(t, "-", res.Removed)

	// The next outer acquire of the same client is a new hold, told apart
	// in the history by its owner.
	_, err = b.Release(ctx, lb)
	require.NoError(t, err)
	again, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.NotEqual(t, outer.Owner, again.Owner)
}

// The watchdog keeps the lease past its TTL while the holder runs, and
// stops renewing at the final release.
func TestRedissonWatchdog(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	ctx := context.Background()
	s, _ := locks.Lookup("redisson")
	ttl := 300 * time.Millisecond
	a := newLock(t, s, cl.Addrs()[0], 1, ttl, false)
	b := newLock(t, s, cl.Addrs()[0], 2, ttl, false)
	rdb := rawClient(t, cl.Addrs()[0])

	la, err := a.Acquire(ctx)
	require.NoError(t, err)
	time.Sleep(4 * ttl)
	_, err = b.Acquire(ctx)
	require.ErrorIs(t, err, locks.ErrHeld, "renewed every TTL/3")
	pttl, err := rdb.PTTL(ctx, "k:redisson").Result()
	require.NoError(t, err)
	require.Greater(t, pttl, ttl/2, "renewed recently")

	_, err = a.Release(ctx, la)
	require.NoError(t, err)
	// After the final release nothing renews a's field: plant it by hand
	// with a short TTL and watch it expire.
	field := la.Owner[:strings.LastIndexByte(la.Owner, ':')]
	require.NoError(t, rdb.HSet(ctx, "k:redisson", field, 1).Err())
	require.NoError(t, rdb.PExpire(ctx, "k:redisson", ttl).Err())
	time.Sleep(2 * ttl)
	n, err := rdb.Exists(ctx, "k:redisson").Result()
	require.NoError(t, err)
	require.Zero(t, n, "the watchdog stopped at the final release")
}

// The watchdog lives in the holder's process: freeze the process and the
// lease runs out within one TTL.
func TestRedissonFrozenHolderLosesLease(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	ctx := context.Background()
	s, _ := locks.Lookup("redisson")
	ttl := 300 * time.Millisecond
	addr := cl.Addrs()[0]

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKTEST_REDISSON_HOLDER="+addr, "LOCKTEST_TTL="+ttl.String())
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "acquired "), "holder said %q", line)

	b := newLock(t, s, addr, 2, ttl, false)
	time.Sleep(4 * ttl)
	_, err = b.Acquire(ctx)
	require.ErrorIs(t, err, locks.ErrHeld, "the holder's watchdog renews while it runs")

	require.NoError(t, proc.Stop(cmd.Process.Pid))
	frozen := time.Now()
	for {
		_, err = b.Acquire(ctx)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, locks.ErrHeld)
		require.Less(t, time.Since(frozen), ttl+500*time.Millisecond, "the lease outlived the frozen holder")
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(frozen)
	t.Logf("lease gone %s after the holder froze (TTL %s)", took.Round(time.Millisecond), ttl)
	// The last renewal was at most TTL/3 before the freeze.
	require.Greater(t, took, ttl/2)
}

// --wait: a blocked acquire wakes on the unlock message, or after the
// lock's remaining time to live when nobody unlocks; it does not poll.
func TestRedissonWaitWakesOnUnlock(t *testing.T) {
	t.Parallel()
	cl := startRedis(t)
	ctx := context.Background()
	s, _ := locks.Lookup("redisson")
	addr := cl.Addrs()[0]
	a := newLock(t, s, addr, 1, 5*time.Second, false)
	b := locks.Blocking(newLock(t, s, addr, 2, 5*time.Second, false), 100*time.Millisecond, 3*time.Second, nil)

	la, err := a.Acquire(ctx)
	require.NoError(t, err)
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = a.Release(ctx, la)
	}()
	start := time.Now()
	lb, err := b.Acquire(ctx)
	require.NoError(t, err)
	// Without the message it would sleep until the lock's TTL (5 s).
	require.Less(t, time.Since(start), time.Second, "woken by the unlock message")
	_, err = b.Release(ctx, lb)
	require.NoError(t, err)

	// A holder that died holding the lock publishes nothing: the waiter
	// wakes when the remaining TTL has passed.
	rdb := rawClient(t, addr)
	require.NoError(t, rdb.HSet(ctx, "k:redisson", "dead-client:1", 1).Err())
	require.NoError(t, rdb.PExpire(ctx, "k:redisson", 400*time.Millisecond).Err())
	start = time.Now()
	lb, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Less(t, time.Since(start), 1500*time.Millisecond)

	// And gives up with ErrHeld when the lock stays held.
	c := locks.Blocking(newLock(t, s, addr, 3, 5*time.Second, false), 100*time.Millisecond, 300*time.Millisecond, nil)
	start = time.Now()
	_, err = c.Acquire(ctx)
	require.ErrorIs(t, err, locks.ErrHeld)
	require.Less(t, time.Since(start), time.Second)
	_, err = b.Release(ctx, lb)
	require.NoError(t, err)
}

// Through Sentinel: the client finds the master, and after the master
// fails it follows the new one, which never saw the last grant.
func TestSentinelFollowsNewMaster(t *testing.T) {
	t.Parallel()
	cl := startSentinel(t)
	ctx := context.Background()
	s, _ := locks.Lookup("redis-sentinel")
	a := newLockOn(t, s, cl.Addrs(), 1, 10*time.Second, false)
	b := newLockOn(t, s, cl.Addrs(), 2, 10*time.Second, false)

	la, err := a.Acquire(ctx)
	require.NoError(t, err)
	_, err = b.Acquire(ctx)
	require.ErrorIs(t, err, locks.ErrHeld)
	_, err = a.Release(ctx, la)
	require.NoError(t, err)

	f, ok := cl.(clusters.Failoverer)
	require.True(t, ok)
	type result struct {
		detail string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		d, err := f.FailPrimary(ctx)
		done <- result{d, err}
	}()
	// Acquire once the master is cut from its replicas: the grant stays
	// on the master alone, and dies with it.
	master := rawClient(t, cl.Nodes()[0].Addr())
	require.Eventually(t, func() bool {
		info, err := master.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:0")
	}, 5*time.Second, 5*time.Millisecond)
	lost, err := a.Acquire(ctx)
	require.NoError(t, err)
	res := <-done
	require.NoError(t, res.err)
	require.Contains(t, res.detail, "granted on it alone")
	t.Log(res.detail)

	// b asks Sentinel, reaches the promoted replica and gets the lock
	// while a's 10 s lease is still running: two holders.
	var lb locks.Lease
	require.Eventually(t, func() bool {
		lb, err = b.Acquire(ctx)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "b never got the lock on the new master: %v", err)
	require.True(t, time.Now().Before(lost.ValidUntil), "a's lease is still valid")

	// a follows the new master too: its release finds b's key there.
	require.Eventually(t, func() bool {
		_, err = a.Release(ctx, lost)
		return errors.Is(err, locks.ErrNotOwner)
	}, 5*time.Second, 20*time.Millisecond, "a's release: %v", err)
	_, err = b.Release(ctx, lb)
	require.NoError(t, err)
}
