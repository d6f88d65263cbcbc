package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/recipe"
	"github.com/locktest/locktest/internal/testenv"
)

func needSentinel(t *testing.T) {
	t.Helper()
	testenv.Require(t, clusters.Check("redis-sentinel"))
}

// startSentinel starts a redis-sentinel topology of the test's own, outside
// any network namespace, stopped when the test ends; its first data node
// is the master.
func startSentinel(t *testing.T) *sentinelCluster {
	t.Helper()
	ctx := context.Background()
	cl, err := Backend{}.Start(ctx, clusters.Spec{Topology: "redis-sentinel", Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Stop(ctx)) })
	return cl.(*sentinelCluster)
}

// The topology comes up whole, FailPrimary loses a grant that only the
// master had and gets a replica promoted, Rejoin makes the old master a
// replica again, and Stop leaves nothing running.
func TestSentinelTopology(t *testing.T) {
	needSentinel(t)
	t.Parallel()
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

func needNet(t *testing.T) {
	t.Helper()
	testenv.Require(t, netns.Available())
}

// With a network, every server of the topology has its own namespace and
// address, the Sentinels hand clients (in namespaces of their own) the
// namespace addresses, and a partition that cuts the master from every
// other host gets a replica promoted, which the clients then reach through
// Sentinel.
func TestSentinelTopologyInNamespaces(t *testing.T) {
	needSentinel(t)
	needNet(t)
	t.Parallel()
	ctx := context.Background()
	id := fmt.Sprintf("ltts%x", os.Getpid()%0xffff)
	nw, err := netns.New(id)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, nw.Close())
		require.Empty(t, netns.Names(id), "namespaces left behind")
	}()
	start := time.Now()
	cl, err := Backend{}.Start(ctx, clusters.Spec{Topology: "redis-sentinel", Dir: t.TempDir(), Net: nw})
	require.NoError(t, err)
	t.Logf("up in namespaces in %s", time.Since(start).Round(time.Millisecond))
	var pids []int
	defer func() {
		require.NoError(t, cl.Stop(ctx))
		for _, pid := range pids {
			require.Error(t, syscall.Kill(pid, 0), "pid %d still runs after Stop", pid)
		}
	}()
	hosts := map[string]*netns.Host{}
	ips := map[string]bool{}
	for _, n := range cl.Nodes() {
		h := n.(clusters.Hosted).Host()
		require.NotNil(t, h, "%s has a namespace", n.Name())
		require.True(t, strings.HasPrefix(h.NS, id+"-"), "%s: namespace %s carries the run prefix", n.Name(), h.NS)
		require.Equal(t, h.IP, strings.Split(n.Addr(), ":")[0], "%s listens on its namespace address", n.Name())
		require.False(t, ips[h.IP], "%s: address %s given twice", n.Name(), h.IP)
		ips[h.IP] = true
		hosts[n.Addr()] = h
		pids = append(pids, n.PID())
	}
	for _, a := range cl.Addrs() {
		require.True(t, strings.HasSuffix(a, ":26379"), "clients get the sentinels: %s", a)
	}

	// What the Sentinels know of each other and of the replicas: namespace
	// addresses only.
	s1 := cl.Nodes()[3]
	adm := redis.NewClient(&redis.Options{Addr: s1.Addr(), Protocol: 2, DisableIdentity: true,
		Dialer: func(_ context.Context, _, addr string) (net.Conn, error) { return hosts[addr].Dial(addr, time.Second) }})
	defer adm.Close()
	for _, cmd := range [][]any{{"SENTINEL", "SENTINELS", clusters.SentinelMaster}, {"SENTINEL", "REPLICAS", clusters.SentinelMaster}} {
		v, err := adm.Do(ctx, cmd...).Slice()
		require.NoError(t, err)
		require.Len(t, v, 2, "%v", cmd)
		for _, e := range v {
			f := map[string]string{}
			kv := e.([]any)
			for i := 0; i+1 < len(kv); i += 2 {
				f[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
			}
			require.Contains(t, hosts, f["ip"]+":"+f["port"], "%v names %s:%s, no server's namespace address", cmd, f["ip"], f["port"])
		}
	}

	// A client in its own namespace finds the master through Sentinel.
	ch, err := nw.AddHost("client-1")
	require.NoError(t, err)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: clusters.SentinelMaster, SentinelAddrs: cl.Addrs(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		Protocol: 2, DisableIdentity: true,
		Dialer: func(_ context.Context, _, addr string) (net.Conn, error) { return ch.Dial(addr, 200*time.Millisecond) },
	})
	defer rdb.Close()
	require.NoError(t, rdb.Set(ctx, "k", "before", 0).Err())

	// The master cut from every other host, as the partition fault's
	// isolate-server does: the Sentinels promote a replica.
	old := cl.Nodes()[0]
	oh := hosts[old.Addr()]
	var pairs [][2]*netns.Host
	for _, h := range nw.Hosts() {
		pairs = append(pairs, [2]*netns.Host{oh, h})
	}
	cut := time.Now()
	require.NoError(t, nw.Block(ctx, pairs))
	var newMaster string
	require.Eventually(t, func() bool {
		v, err := adm.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", clusters.SentinelMaster).StringSlice()
		if err == nil && len(v) == 2 && v[0]+":"+v[1] != old.Addr() {
			newMaster = v[0] + ":" + v[1]
			return true
		}
		return false
	}, 20*time.Second, 20*time.Millisecond)
	t.Logf("%s promoted %s after the partition", newMaster, time.Since(cut).Round(time.Millisecond))
	require.Contains(t, hosts, newMaster)
	require.NotEqual(t, old.Addr(), newMaster)
	// The client follows it: its write lands on the new master.
	require.Eventually(t, func() bool { return rdb.Set(ctx, "k", "after", 0).Err() == nil }, 10*time.Second, 50*time.Millisecond)
	nm := redis.NewClient(&redis.Options{Addr: newMaster, Protocol: 2, DisableIdentity: true,
		Dialer: func(_ context.Context, _, addr string) (net.Conn, error) { return hosts[addr].Dial(addr, time.Second) }})
	defer nm.Close()
	require.Equal(t, "after", nm.Get(ctx, "k").Val())
	require.NoError(t, nw.Heal(ctx))
}

// FailPrimary with no client granting anything: it waits for a lone grant
// only as long as Sentinel still takes the cut-off replicas for promotion
// (a replica whose link to the master has been down for more than 10
// down-after periods, plus the master's time down, is never promoted), then
// kills the master anyway, and a replica is promoted. On a busy machine a
// grant can take longer than that to come.
func TestSentinelFailPrimaryWithoutGrant(t *testing.T) {
	needSentinel(t)
	t.Parallel()
	ctx := context.Background()
	cl := startSentinel(t)
	var f clusters.Failoverer = cl
	start := time.Now()
	detail, err := f.FailPrimary(ctx)
	require.NoError(t, err)
	t.Logf("%s (in %s)", detail, time.Since(start).Round(time.Millisecond))
	require.Contains(t, detail, "no lease granted on it alone")
	require.Zero(t, cl.Nodes()[0].PID(), "the old master is dead")
	require.NoError(t, f.Rejoin(ctx))
}

// A failover Sentinel will not finish (every replica has replica-priority
// 0, which Sentinel never promotes, as it refuses a replica it judges
// stale): FailPrimary kills the master and returns ErrNoPromotion once its
// limit has passed, saying how the Sentinels saw the master and replicas;
// Rejoin restarts the old master, which is the master again with its
// replicas resynced, so the pooled cluster probes whole.
func TestSentinelFailPrimaryNoPromotion(t *testing.T) {
	needSentinel(t)
	t.Parallel()
	ctx := context.Background()
	sc := startSentinel(t)
	sc.PromotionLimit = 4 * time.Second
	for _, n := range sc.data[1:] {
		rdb := recipe.AdminClient(n.Addr())
		require.NoError(t, rdb.ConfigSet(ctx, "replica-priority", "0").Err())
		rdb.Close()
	}
	// Every Sentinel has read the new priority (its INFO poll of a replica
	// comes every 10 s while the master is up).
	require.Eventually(t, func() bool {
		for _, s := range sc.sentinels {
			rdb := recipe.AdminClient(s.Addr())
			v, err := rdb.Do(ctx, "SENTINEL", "REPLICAS", clusters.SentinelMaster).Slice()
			rdb.Close()
			if err != nil || len(v) != 2 || strings.Count(fmt.Sprint(v), "slave-priority 0") != 2 {
				return false
			}
		}
		return true
	}, 25*time.Second, 200*time.Millisecond)

	_, err := sc.FailPrimary(ctx)
	require.ErrorIs(t, err, clusters.ErrNoPromotion)
	t.Log(err)
	require.Contains(t, err.Error(), "no sentinel named a new master within 4s")
	require.Contains(t, err.Error(), "the master with flags")
	require.Zero(t, sc.data[0].PID(), "the old master is dead")

	require.NoError(t, sc.Rejoin(ctx))
	require.NoError(t, sc.Probe(ctx), "the old master is the master again")
	_, late := sc.LatePromotion(ctx)
	require.False(t, late, "no promotion came")
	rdb := recipe.AdminClient(sc.data[0].Addr())
	defer rdb.Close()
	reps, err := recipe.OnlineReplicas(ctx, rdb)
	require.NoError(t, err)
	require.Len(t, reps, 2)
}

// A promotion that comes after FailPrimary stopped waiting for one
// (Sentinel finishing its failover past the limit, as on a starved
// machine): FailPrimary returns ErrNoPromotion, LatePromotion then names
// the replica the Sentinels promoted, once, and Rejoin makes the old
// master its replica.
func TestSentinelLatePromotion(t *testing.T) {
	needSentinel(t)
	t.Parallel()
	ctx := context.Background()
	sc := startSentinel(t)
	sc.PromotionLimit = 200 * time.Millisecond // Sentinel takes about 2.3 s
	// A lease granted on the master alone, after the cut, so that
	// FailPrimary kills it without waiting for one.
	master := recipe.AdminClient(sc.data[0].Addr())
	defer master.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			_ = master.Set(ctx, "locktest:lock", fmt.Sprint(i), 20*time.Second).Err()
		}
	}()
	_, err := sc.FailPrimary(ctx)
	close(stop)
	wg.Wait()
	require.ErrorIs(t, err, clusters.ErrNoPromotion)
	require.Contains(t, err.Error(), "granted on it alone")

	var line string
	require.Eventually(t, func() bool {
		var ok bool
		line, ok = sc.LatePromotion(ctx)
		return ok
	}, 25*time.Second, 100*time.Millisecond, "the Sentinels promote a replica after all")
	t.Log(line)
	require.Contains(t, line, "after FailPrimary stopped waiting for a promotion")
	require.True(t, strings.Contains(line, sc.data[1].Addr()) || strings.Contains(line, sc.data[2].Addr()), "a replica is named: %s", line)
	_, again := sc.LatePromotion(ctx)
	require.False(t, again, "said once")

	require.NoError(t, sc.Rejoin(ctx))
	info, err := master.Info(ctx, "replication").Result()
	require.NoError(t, err)
	require.Equal(t, "slave", recipe.InfoFields(info)["role"], "the old master is a replica of the promoted one")
}
