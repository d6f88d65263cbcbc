package docker_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
)

// startTimed is start, logging how long the topology took to serve.
func startTimed(t *testing.T, spec clusters.Spec) clusters.Cluster {
	t.Helper()
	t0 := time.Now()
	cl := start(t, spec)
	t.Logf("%s up in %s: %v", spec.Topology, time.Since(t0).Round(time.Millisecond), cl.Versions())
	return cl
}

// The ensembles elect a leader; a killed leader is replaced, and comes back
// with its data as a member.
func TestEnsemblesOnDocker(t *testing.T) {
	for _, tc := range []struct{ topology, kind, version string }{
		{"zk3", docker.KindZooKeeper, "zookeeper 3.8"},
		{"etcd3", docker.KindEtcd, "etcd 3."},
	} {
		t.Run(tc.topology, func(t *testing.T) {
			t.Parallel()
			needImage(t, tc.kind)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cl := startTimed(t, clusters.Spec{Topology: tc.topology})
			require.Len(t, cl.Addrs(), 3)
			require.Contains(t, cl.Versions()[0], tc.version)
			l, err := cl.(clusters.Leader).Leader(ctx)
			require.NoError(t, err)
			require.True(t, l.(interface{ KeepsData() bool }).KeepsData())
			t0 := time.Now()
			require.NoError(t, l.Kill())
			l2, err := cl.(clusters.Leader).Leader(ctx)
			require.NoError(t, err)
			require.NotEqual(t, l.Name(), l2.Name())
			t.Logf("%s: killed leader %s, new leader %s after %s", tc.topology, l.Name(), l2.Name(), time.Since(t0).Round(time.Millisecond))
			require.NoError(t, l.Restart(ctx))
			l3, err := cl.(clusters.Leader).Leader(ctx)
			require.NoError(t, err)
			require.Equal(t, l2.Name(), l3.Name(), "the restarted member rejoined as a follower")
		})
	}
}

// MariaDB answers the clients' account and keeps its rows across a kill.
func TestMySQLOnDocker(t *testing.T) {
	needImage(t, docker.KindMariaDB)
	t.Parallel()
	ctx := context.Background()
	cl := startTimed(t, clusters.Spec{Topology: "mysql"})
	require.Contains(t, cl.Versions()[0], "MariaDB 10.11")
	db := clientDB(t, cl.Addrs()[0])
	_, err := db.ExecContext(ctx, "CREATE TABLE t (k INT PRIMARY KEY)")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	n := cl.Nodes()[0]
	require.NoError(t, n.Kill())
	require.NoError(t, n.Restart(ctx))
	var k int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT k FROM t").Scan(&k))
	require.Equal(t, 1, k, "the committed row survived the kill")
}

// mysql-replicated: the replica follows; FailPrimary promotes it and
// Rejoin makes the old primary its replica.
func TestMySQLReplicatedOnDocker(t *testing.T) {
	needImage(t, docker.KindMariaDB)
	t.Parallel()
	ctx := context.Background()
	cl := startTimed(t, clusters.Spec{Topology: "mysql-replicated"})
	first := cl.Addrs()[0]
	db := clientDB(t, first)
	_, err := db.ExecContext(ctx, "CREATE TABLE t (k INT PRIMARY KEY)")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	replica := clientDB(t, cl.Addrs()[1])
	require.Eventually(t, func() bool {
		var k int
		return replica.QueryRowContext(ctx, "SELECT k FROM t").Scan(&k) == nil && k == 1
	}, 10*time.Second, 50*time.Millisecond, "the replica follows")
	_, err = replica.ExecContext(ctx, "INSERT INTO t VALUES (2)")
	require.Error(t, err, "the replica is read-only")

	fo := cl.(clusters.Failoverer)
	line, err := fo.FailPrimary(ctx)
	require.NoError(t, err)
	t.Log(line)
	require.NotEqual(t, first, cl.Addrs()[0], "the promoted replica comes first")
	_, err = replica.ExecContext(ctx, "INSERT INTO t VALUES (2)")
	require.NoError(t, err, "the promoted replica takes writes")
	require.NoError(t, fo.Rejoin(ctx))
	old := clientDB(t, first)
	require.Eventually(t, func() bool {
		var n int
		return old.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n) == nil && n == 2
	}, 10*time.Second, 50*time.Millisecond, "the old primary replicates from the new one")
	_, err = old.ExecContext(ctx, "INSERT INTO t VALUES (3)")
	require.Error(t, err, "the rejoined server is read-only")
}

func clientDB(t *testing.T, addr string) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "locktest", "locktest", "tcp", addr, "locktest"
	cfg.Timeout = 2 * time.Second
	conn, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// redis-sentinel: the Sentinels see the master and both replicas; the data
// nodes run under the clock shim; a failover promotes a replica, and the
// old master rejoins as a replica.
func TestSentinelOnDocker(t *testing.T) {
	needDocker(t)
	t.Parallel()
	ctx := context.Background()
	cl := startTimed(t, clusters.Spec{Topology: "redis-sentinel", ClockShim: true})
	var names []string
	for _, n := range cl.Nodes() {
		names = append(names, n.Name())
	}
	require.Equal(t, []string{"redis-1", "redis-2", "redis-3", "sentinel-1", "sentinel-2", "sentinel-3"}, names)
	require.Len(t, cl.Addrs(), 3)
	masterOf := func() string {
		rdb := redis.NewSentinelClient(&redis.Options{Addr: cl.Addrs()[0], Protocol: 2, DisableIdentity: true})
		defer rdb.Close()
		v, err := rdb.GetMasterAddrByName(ctx, clusters.SentinelMaster).Result()
		require.NoError(t, err)
		return strings.Join(v, ":")
	}
	require.Equal(t, cl.Nodes()[0].Addr(), masterOf())
	// A clock jump on the master expires a lease at once.
	c := dial(t, cl.Nodes()[0].Addr())
	require.Equal(t, "+OK", do(t, c, "SET jump v PX 30000"))
	require.NoError(t, cl.Nodes()[0].(clusters.ClockShifter).ShiftClock(60*time.Second))
	require.Eventually(t, func() bool { return do(t, c, "GET jump") == "$-1" }, 2*time.Second, 50*time.Millisecond, "the key outlived a 60 s clock jump")
	require.NoError(t, cl.Nodes()[0].(clusters.ClockShifter).ShiftClock(0))
	require.Error(t, cl.Nodes()[3].(clusters.ClockShifter).ShiftClock(time.Second), "a Sentinel runs without the shim")
	// A lease granted on the master alone, as FailPrimary waits for.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: clusters.SentinelMaster, SentinelAddrs: cl.Addrs(), MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, Protocol: 2, DisableIdentity: true})
		defer rdb.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			rdb.Set(ctx, fmt.Sprintf("lease-%d", i), "x", 30*time.Second)
		}
	}()
	fo := cl.(clusters.Failoverer)
	line, err := fo.FailPrimary(ctx)
	close(stop)
	<-done
	require.NoError(t, err)
	t.Log(line)
	require.Contains(t, line, "granted on it alone")
	require.NotEqual(t, cl.Nodes()[0].Addr(), masterOf())
	require.NoError(t, fo.Rejoin(ctx))
}

// MariaDB in a container under the clock shim: NOW() follows ShiftClock,
// as on the local backend.
func TestMySQLClockOnDocker(t *testing.T) {
	needImage(t, docker.KindMariaDB)
	t.Parallel()
	ctx := context.Background()
	cl := startTimed(t, clusters.Spec{Topology: "mysql", ClockShim: true})
	db := clientDB(t, cl.Addrs()[0])
	skew := func() float64 {
		var now float64
		require.NoError(t, db.QueryRowContext(ctx, "SELECT UNIX_TIMESTAMP(NOW(6))").Scan(&now))
		return now - float64(time.Now().UnixNano())/1e9
	}
	require.InDelta(t, 0, skew(), 1)
	n := cl.Nodes()[0].(clusters.ClockShifter)
	require.NoError(t, n.ShiftClock(90*time.Second))
	require.InDelta(t, 90, skew(), 1)
	require.NoError(t, n.ShiftClock(0))
	require.InDelta(t, 0, skew(), 1)
}
