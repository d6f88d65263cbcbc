package locks_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/workloads"
)

// startMySQL starts a private MariaDB topology for one test. Its run
// directory is one the mysql user can reach (t.TempDir is private to root;
// the backend would move the datadirs to the temp directory).
func startMySQL(tb testing.TB, topology string, params map[string]string) clusters.Cluster {
	tb.Helper()
	if m := clusters.Missing(topology); len(m) > 0 {
		if os.Getenv("CI") != "" {
			tb.Fatalf("under CI: %v", clusters.MissingError(m))
		}
		tb.Skip("MariaDB not installed: run scripts/install.sh (apt-get install -y mariadb-server mariadb-client)")
	}
	dir, err := os.MkdirTemp("", "locktest-mysql-test-")
	require.NoError(tb, err)
	require.NoError(tb, os.Chmod(dir, 0o755))
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	t0 := time.Now()
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: topology, Dir: dir, Params: params})
	require.NoError(tb, err)
	tb.Logf("%s up in %s", topology, time.Since(t0).Round(time.Millisecond))
	tb.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

func mysqlSchemes() []locks.Scheme {
	var out []locks.Scheme
	for _, s := range locks.Schemes {
		if s.Topology == "mysql" {
			out = append(out, s)
		}
	}
	return out
}

func newMySQLLock(tb testing.TB, s locks.Scheme, addrs []string, client int, ttl time.Duration, fence bool) locks.Lock {
	tb.Helper()
	l, err := s.New(locks.Config{Server: workloads.ServerSettings(), Addrs: addrs, Key: "k:" + s.Name, TTL: ttl, Fence: fence, OpTimeout: time.Second, Client: client,
		Params: map[string]string{}})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = l.Close() })
	return l
}

func requireOutcome(t *testing.T, err error, typ history.Type, reason string) {
	t.Helper()
	gotT, gotR := locks.Classify(err)
	require.Equal(t, typ, gotT, "err: %v", err)
	require.Equal(t, reason, gotR, "err: %v", err)
}

// The conformance test of locks_test.go, over the MySQL schemes: mutual
// exclusion, release by the holder, growing fencing tokens, and the lease.
func TestMySQLConformance(t *testing.T) {
	t.Parallel()
	cl := startMySQL(t, "mysql", nil)
	ctx := context.Background()
	require.NotEmpty(t, mysqlSchemes())
	for _, s := range mysqlSchemes() {
		t.Run(s.Name, func(t *testing.T) {
			require.True(t, s.RunsOn("mysql-replicated"))
			ttl := 300 * time.Millisecond
			a := newMySQLLock(t, s, cl.Addrs(), 1, ttl, true)
			b := newMySQLLock(t, s, cl.Addrs(), 2, ttl, true)

			la, err := a.Acquire(ctx)
			require.NoError(t, err)
			require.NotEmpty(t, la.Owner)
			require.NotNil(t, la.Token, "fenced acquire gives a token")
			_, err = b.Acquire(ctx)
			require.ErrorIs(t, err, locks.ErrHeld)
			requireOutcome(t, err, history.Fail, history.ReasonHeld)

			res, err := a.Release(ctx, la)
			require.NoError(t, err)
			require.Equal(t, la.Owner, res.Removed)
			lb, err := b.Acquire(ctx)
			require.NoError(t, err)
			require.Greater(t, *lb.Token, *la.Token, "tokens grow")
			require.NotEqual(t, la.Owner, lb.Owner)

			// A release of a lease this client does not hold changes nothing.
			res, err = a.Release(ctx, la)
			require.ErrorIs(t, err, locks.ErrNotOwner)
			require.Equal(t, "-", res.Removed)

			time.Sleep(ttl + 100*time.Millisecond)
			lc, err := a.Acquire(ctx)
			if !s.Lease {
				require.ErrorIs(t, err, locks.ErrHeld, "a lock without expiry never expires")
				res, err = b.Release(ctx, lb)
				require.NoError(t, err)
				require.Equal(t, lb.Owner, res.Removed)
				return
			}
			require.NoError(t, err, "the lease expired: the lock is free")
			require.Greater(t, *lc.Token, *lb.Token)
			res, err = b.Release(ctx, lb)
			require.ErrorIs(t, err, locks.ErrNotOwner, "b's lease was taken over")
			require.Equal(t, "-", res.Removed)
			res, err = a.Release(ctx, lc)
			require.NoError(t, err)
			require.Equal(t, lc.Owner, res.Removed)
		})
	}
}

// A lock that lives in a session dies with the connection the server drops
// after wait_timeout; the holder is not told, its release says the lock was
// gone, and its next acquire works on a new connection. The lock tables do
// not care about idle connections.
func TestMySQLIdleConnectionDropped(t *testing.T) {
	t.Parallel()
	cl := startMySQL(t, "mysql", map[string]string{"wait_timeout": "1"})
	ctx := context.Background()
	for _, s := range mysqlSchemes() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			session := s.Name == "mysql-for-update" || s.Name == "mysql-get-lock"
			a := newMySQLLock(t, s, cl.Addrs(), 1, time.Hour, false)
			b := newMySQLLock(t, s, cl.Addrs(), 2, time.Hour, false)
			la, err := a.Acquire(ctx)
			require.NoError(t, err)
			time.Sleep(2500 * time.Millisecond) // a stalls, idle past wait_timeout
			lb, err := b.Acquire(ctx)
			if !session {
				require.ErrorIs(t, err, locks.ErrHeld)
				res, err := a.Release(ctx, la)
				require.NoError(t, err)
				require.Equal(t, la.Owner, res.Removed)
				return
			}
			require.NoError(t, err, "the server dropped a's connection and its lock")
			res, err := a.Release(ctx, la)
			require.Error(t, err, "a's release cannot succeed")
			if typ, _ := locks.Classify(err); typ == history.Fail {
				require.ErrorIs(t, err, locks.ErrNotOwner)
				require.Equal(t, "-", res.Removed)
			}
			t.Logf("a's release: %v", err)
			_, err = a.Acquire(ctx)
			require.ErrorIs(t, err, locks.ErrHeld, "a is on a fresh connection, and b holds the lock")
			_, err = b.Release(ctx, lb)
			require.NoError(t, err)
			la, err = a.Acquire(ctx)
			require.NoError(t, err)
			_, err = a.Release(ctx, la)
			require.NoError(t, err)
		})
	}
}

// Definite and indeterminate failures: nobody listening and a read-only
// server are definite; a frozen server after the request was sent is not.
// A closed client (a crashed holder) frees the session locks.
func TestMySQLErrors(t *testing.T) {
	t.Parallel()
	cl := startMySQL(t, "mysql", nil)
	ctx := context.Background()
	admin := adminDB(t, cl)
	for _, s := range mysqlSchemes() {
		t.Run(s.Name, func(t *testing.T) {
			dead := newMySQLLock(t, s, []string{"127.0.0.1:1"}, 1, time.Second, false)
			_, err := dead.Acquire(ctx)
			requireOutcome(t, err, history.Fail, history.ReasonError)

			a := newMySQLLock(t, s, cl.Addrs(), 1, time.Second, false)
			la, err := a.Acquire(ctx)
			require.NoError(t, err)
			_, err = a.Release(ctx, la)
			require.NoError(t, err)

			_, err = admin.Exec("SET GLOBAL read_only=1")
			require.NoError(t, err)
			_, err = a.Acquire(ctx)
			_, _ = admin.Exec("SET GLOBAL read_only=0")
			require.ErrorIs(t, err, locks.ErrRejected)
			require.ErrorContains(t, err, "read-only")
			requireOutcome(t, err, history.Fail, history.ReasonError)
			if s.Name == "mysql-get-lock" {
				var user sql.NullInt64
				require.NoError(t, admin.QueryRow("SELECT IS_USED_LOCK(?)", "k:"+s.Name).Scan(&user))
				require.False(t, user.Valid, "a read-only server was not asked for the lock")
			}

			// A client that goes away while holding.
			_, err = a.Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, a.Close())
			b := newMySQLLock(t, s, cl.Addrs(), 2, time.Second, false)
			if s.Name == "mysql-for-update" || s.Name == "mysql-get-lock" {
				require.Eventually(t, func() bool {
					lb, err := b.Acquire(ctx)
					if err == nil {
						_, _ = b.Release(ctx, lb)
					}
					return err == nil
				}, 2*time.Second, 20*time.Millisecond, "the session's lock went with it")
			} else {
				_, err = b.Acquire(ctx)
				require.ErrorIs(t, err, locks.ErrHeld, "the row stays")
				_, err = admin.Exec("DELETE FROM locktest." + map[string]string{
					"mysql-optimistic": "optimistic_locks", "mysql-unique": "unique_locks", "mysql-unique-expiry": "unique_expiry_locks",
				}[s.Name])
				require.NoError(t, err)
				_, _ = admin.Exec("UPDATE locktest.optimistic_locks SET status=0")
			}
		})
	}
	t.Run("frozen server", func(t *testing.T) {
		s, _ := locks.Lookup("mysql-unique")
		l, err := s.New(locks.Config{Server: workloads.ServerSettings(), Addrs: cl.Addrs(), Key: "frozen", TTL: time.Second, OpTimeout: 300 * time.Millisecond, Client: 1})
		require.NoError(t, err)
		defer l.Close()
		la, err := l.Acquire(ctx) // warms the connection
		require.NoError(t, err)
		n := cl.Nodes()[0]
		require.NoError(t, n.Pause())
		defer func() { _ = n.Resume() }()
		_, err = l.Release(ctx, la)
		requireOutcome(t, err, history.Info, "")
	})
}

// adminDB is the primary's root account (over its socket): read_only is
// global, which the clients' account may not set.
func adminDB(t *testing.T, cl clusters.Cluster) *sql.DB {
	t.Helper()
	if a, ok := cl.(interface{ Admin() *sql.DB }); ok {
		return a.Admin()
	}
	t.Fatalf("%T has no admin connection", cl)
	return nil
}

// A failover: clients move to the promoted replica. A lock held in a
// session is lost with the old primary whatever replication did; a lock
// row survives if it reached the replica before the kill.
func TestMySQLFailover(t *testing.T) {
	t.Parallel()
	cl := startMySQL(t, "mysql-replicated", nil)
	fo := cl.(clusters.Failoverer)
	ctx := context.Background()
	for i, name := range []string{"mysql-for-update", "mysql-unique"} {
		s, _ := locks.Lookup(name)
		a := newMySQLLock(t, s, cl.Addrs(), 1, time.Hour, true)
		b := newMySQLLock(t, s, cl.Addrs(), 2, time.Hour, true)
		la, err := a.Acquire(ctx)
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond) // replicated
		line, err := fo.FailPrimary(ctx)
		require.NoError(t, err)
		t.Log(line)
		lb, err := b.Acquire(ctx)
		switch name {
		case "mysql-for-update":
			require.NoError(t, err, "the row lock died with the old primary")
			require.Greater(t, *lb.Token, *la.Token, "the sequence went on from its cached block")
			_, err = a.Release(ctx, la)
			require.Error(t, err)
			_, err = b.Release(ctx, lb)
			require.NoError(t, err)
		case "mysql-unique":
			require.ErrorIs(t, err, locks.ErrHeld, "the row had reached the replica")
			res, err := a.Release(ctx, la)
			require.NoError(t, err, "a's release goes to the new primary")
			require.Equal(t, la.Owner, res.Removed)
		}
		require.NoError(t, fo.Rejoin(ctx))
		require.Equal(t, addrOf(cl, []string{"mysql-2", "mysql-1"}[i]), cl.Addrs()[0], "the promoted server comes first")
	}
}

func addrOf(cl clusters.Cluster, name string) string {
	for _, n := range cl.Nodes() {
		if n.Name() == name {
			return n.Addr()
		}
	}
	return ""
}

// BenchmarkMySQLAcquireRelease measures one client's acquire+release cycle
// on a local MariaDB for every MySQL scheme, next to a plain SELECT 1 round
// trip on the same server through the same driver.
func BenchmarkMySQLAcquireRelease(b *testing.B) {
	cl := startMySQL(b, "mysql", nil)
	ctx := context.Background()
	rt := selectOneRate(b, cl.Addrs()[0])
	for _, s := range mysqlSchemes() {
		for _, fence := range []bool{false, true} {
			name := s.Name
			if fence {
				name += "/fenced"
			}
			b.Run(name, func(b *testing.B) {
				benchCycles(b, ctx, newMySQLLock(b, s, cl.Addrs(), 1, 10*time.Second, fence))
				b.ReportMetric(rt, "select1/s")
			})
		}
	}
}

// selectOneRate is the round trips per second of SELECT 1 on one
// connection: the floor of every statement.
func selectOneRate(b *testing.B, addr string) float64 {
	b.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "locktest", "locktest", "tcp", addr, "locktest"
	c, err := mysql.NewConnector(cfg)
	require.NoError(b, err)
	db := sql.OpenDB(c)
	defer db.Close()
	conn, err := db.Conn(context.Background())
	require.NoError(b, err)
	defer conn.Close()
	const n = 5000
	start := time.Now()
	for i := 0; i < n; i++ {
		var one int
		require.NoError(b, conn.QueryRowContext(context.Background(), "SELECT 1").Scan(&one))
	}
	return n / time.Since(start).Seconds()
}
