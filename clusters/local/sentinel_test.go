package local

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
)

func needSentinel(t *testing.T) {
	t.Helper()
	if m := clusters.Missing("redis-sentinel"); len(m) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("not installed under CI: %v", clusters.MissingError(m))
		}
		t.Skipf("%v", clusters.MissingError(m))
	}
}

// The topology comes up whole, FailPrimary loses a grant that only the
// master had and gets a replica promoted, Rejoin makes the old master a
// replica again, and Stop leaves nothing running.
func TestSentinelTopology(t *testing.T) {
	needSentinel(t)
	ctx := context.Background()
	start := time.Now()
	cl, err := Backend{}.Start(ctx, clusters.Spec{Topology: "redis-sentinel", Dir: t.TempDir()})
	require.NoError(t, err)
	t.Logf("up in %s", time.Since(start).Round(time.Millisecond))
	var pids []int
	defer func() {
		require.NoError(t, cl.Stop(ctx))
		for _, pid := range pids {
			require.Error(t, syscall.Kill(pid, 0), "pid %d still runs after Stop", pid)
		}
	}()
	var names []string
	for _, n := range cl.Nodes() {
		names = append(names, n.Name())
	}
	require.Equal(t, []string{"redis-1", "redis-2", "redis-3", "sentinel-1", "sentinel-2", "sentinel-3"}, names)
	require.Len(t, cl.Addrs(), 3)
	for i, a := range cl.Addrs() {
		require.Equal(t, cl.Nodes()[3+i].Addr(), a, "clients get the sentinels")
	}

	// A client through Sentinel grants a new lease every 5 ms, as clients
	// taking a lock do, until the master dies.
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: clusters.SentinelMaster, SentinelAddrs: cl.Addrs(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		Protocol: 2, DisableIdentity: true,
	})
	defer rdb.Close()
	var mu sync.Mutex
	acked := 0 // the last value the master acknowledged
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	old := cl.Nodes()[0]
	go func() {
		defer wg.Done()
		for i := 1; old.PID() != 0; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if rdb.Set(ctx, "lease", i, 30*time.Second).Err() == nil {
				mu.Lock()
				acked = i
				mu.Unlock()
			}
		}
	}()

	time.Sleep(200 * time.Millisecond) // some grants reach the replicas
	f, ok := cl.(clusters.Failoverer)
	require.True(t, ok)
	detail, err := f.FailPrimary(ctx)
	require.NoError(t, err)
	t.Log(detail)
	require.Contains(t, detail, "granted on it alone")
	require.Zero(t, old.PID(), "the old master is dead")
	close(stop)
	wg.Wait()
	mu.Lock()
	lastOnOld := acked
	mu.Unlock()

	// The new master never saw the last grants.
	var onNew int
	require.Eventually(t, func() bool {
		v, err := rdb.Get(ctx, "lease").Int()
		onNew = v
		return err == nil || errors.Is(err, redis.Nil)
	}, 5*time.Second, 20*time.Millisecond)
	require.Less(t, onNew, lastOnOld, "grants acknowledged by the old master are gone")

	start = time.Now()
	require.NoError(t, f.Rejoin(ctx))
	t.Logf("old master demoted and in sync %s after its restart", time.Since(start).Round(time.Millisecond))
	oc := redis.NewClient(&redis.Options{Addr: old.Addr(), Protocol: 2, DisableIdentity: true})
	defer oc.Close()
	info, err := oc.Info(ctx, "replication").Result()
	require.NoError(t, err)
	require.Contains(t, info, "role:slave")
	for _, n := range cl.Nodes() {
		require.NotZero(t, n.PID(), "%s runs", n.Name())
		pids = append(pids, n.PID())
	}
}
