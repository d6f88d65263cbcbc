package local

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/testenv"
)

// needMariaDB skips outside CI when MariaDB is not installed, and fails
// under CI, where a missing server is a broken install.
func needMariaDB(t *testing.T, topology string) {
	t.Helper()
	testenv.Require(t, clusters.Check(topology))
}

// runDir returns a run directory the mysql user can reach (t.TempDir is
// private to root).
func runDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "locktest-mysql-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(d, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func startTopology(t *testing.T, topology, dir string, params map[string]string) clusters.Cluster {
	t.Helper()
	t0 := time.Now()
	cl, err := Backend{}.Start(context.Background(), clusters.Spec{Topology: topology, Dir: dir, Params: params})
	require.NoError(t, err)
	t.Logf("%s up in %s: %v", topology, time.Since(t0).Round(time.Millisecond), cl.Addrs())
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

// client opens the clients' account on addr.
func client(t *testing.T, addr string) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = mysqlUser, mysqlPassword, "tcp", addr, mysqlDatabase
	cfg.Timeout = time.Second
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestMySQLStartStop(t *testing.T) {
	needMariaDB(t, "mysql")
	t.Parallel()
	for _, private := range []bool{false, true} {
		name := "run dir the mysql user can reach"
		dir := ""
		if private {
			name = "private run dir"
			dir = t.TempDir()
		}
		t.Run(name, func(t *testing.T) {
			if dir == "" {
				dir = runDir(t)
			}
			cl, err := Backend{}.Start(context.Background(), clusters.Spec{Topology: "mysql", Dir: dir, Params: map[string]string{"wait_timeout": "7"}})
			require.NoError(t, err)
			n := cl.Nodes()[0].(*mysqlNode)
			pid := n.PID()
			db := client(t, cl.Addrs()[0])
			var wt int
			require.NoError(t, db.QueryRow("SELECT @@wait_timeout").Scan(&wt))
			require.Equal(t, 7, wt)
			// The clients' account cannot write once read_only is on.
			require.NoError(t, n.exec(context.Background(), "SET GLOBAL read_only=1"))
			_, err = db.Exec("CREATE TABLE t (id INT PRIMARY KEY)")
			var me *mysql.MySQLError
			require.ErrorAs(t, err, &me)
			require.EqualValues(t, 1290, me.Number)
			datadir := n.datadir
			require.NoError(t, cl.Stop(context.Background()))
			require.Error(t, syscall.Kill(pid, 0), "mariadbd still runs")
			require.NoDirExists(t, datadir)
			require.FileExists(t, filepath.Join(dir, "servers", "mysql-1", "mariadb.log"))
		})
	}
}

func TestMySQLBadParam(t *testing.T) {
	needMariaDB(t, "mysql")
	_, err := Backend{}.Start(context.Background(), clusters.Spec{Topology: "mysql", Dir: runDir(t), Params: map[string]string{"wait_timeout": "0"}})
	require.ErrorContains(t, err, "wait_timeout=0")
}

// A replica held back (its applier stopped) receives a write but does not
// apply it: the failover loses that write and says so; one that caught up
// again loses nothing and says that.
func TestMySQLHoldBackLosesTheWrite(t *testing.T) {
	needMariaDB(t, "mysql-replicated")
	t.Parallel()
	ctx := context.Background()
	cl := startTopology(t, "mysql-replicated", runDir(t), nil)
	lag := cl.(clusters.Lagger)
	fo := cl.(clusters.Failoverer)
	a, b := cl.Addrs()[0], cl.Addrs()[1]
	pa, pb := client(t, a), client(t, b)
	_, err := pa.Exec("CREATE TABLE t (id INT PRIMARY KEY)")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(pb, "t") == 0 }, 5*time.Second, 10*time.Millisecond, "the table replicated")

	require.NoError(t, lag.HoldBackReplica(ctx))
	_, err = pa.Exec("INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // received, never applied
	require.Equal(t, 0, count(pb, "t"))
	line, err := fo.FailPrimary(ctx)
	require.NoError(t, err)
	t.Log(line)
	require.True(t, lag.LostWrites(), line)
	require.Equal(t, 0, count(pb, "t"), "the promoted replica never applied the insert")
	require.NoError(t, fo.Rejoin(ctx))

	// Back the other way, with the replica caught up: nothing is lost.
	_, err = pb.Exec("INSERT INTO t VALUES (2)")
	require.NoError(t, err)
	require.NoError(t, lag.HoldBackReplica(ctx))
	require.NoError(t, lag.ResumeReplica(ctx))
	require.Eventually(t, func() bool { return count(pa, "t") == 1 }, 5*time.Second, 10*time.Millisecond, "the rejoined replica follows")
	line, err = fo.FailPrimary(ctx)
	require.NoError(t, err)
	t.Log(line)
	require.False(t, lag.LostWrites(), line)
	require.Equal(t, 1, count(pa, "t"))
	require.NoError(t, fo.Rejoin(ctx))
}

// A failover loses what the replica had not applied, the old primary comes
// back as a replica of the new one, and a second failover goes back.
func TestMySQLFailoverAndRejoin(t *testing.T) {
	needMariaDB(t, "mysql-replicated")
	t.Parallel()
	ctx := context.Background()
	cl := startTopology(t, "mysql-replicated", runDir(t), nil)
	fo := cl.(clusters.Failoverer)
	a, b := cl.Addrs()[0], cl.Addrs()[1]
	pa, pb := client(t, a), client(t, b)
	_, err := pa.Exec("CREATE TABLE t (id INT PRIMARY KEY)")
	require.NoError(t, err)
	_, err = pa.Exec("INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(pb, "t") == 1 }, 5*time.Second, 10*time.Millisecond, "replicated")
	_, err = pb.Exec("INSERT INTO t VALUES (2)")
	require.ErrorContains(t, err, "read-only")

	line, err := fo.FailPrimary(ctx)
	require.NoError(t, err)
	t.Log(line)
	require.Contains(t, line, "promoted mysql-2")
	require.Equal(t, []string{b, a}, cl.Addrs(), "the new primary comes first")
	_, err = pb.Exec("INSERT INTO t VALUES (3)")
	require.NoError(t, err, "the promoted replica takes writes")
	_, err = pa.Exec("INSERT INTO t VALUES (4)")
	require.Error(t, err, "the old primary is down")

	t0 := time.Now()
	require.NoError(t, fo.Rejoin(ctx))
	t.Logf("rejoined in %s", time.Since(t0).Round(time.Millisecond))
	require.Equal(t, 2, count(pa, "t"), "rebuilt from the new primary")
	_, err = pa.Exec("INSERT INTO t VALUES (5)")
	require.ErrorContains(t, err, "read-only")
	_, err = pb.Exec("INSERT INTO t VALUES (6)")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(pa, "t") == 3 }, 5*time.Second, 10*time.Millisecond, "replicates from the new primary")

	// And back.
	line, err = fo.FailPrimary(ctx)
	require.NoError(t, err)
	t.Log(line)
	require.Equal(t, []string{a, b}, cl.Addrs())
	_, err = pa.Exec("INSERT INTO t VALUES (7)")
	require.NoError(t, err)
	require.NoError(t, fo.Rejoin(ctx))
	require.Eventually(t, func() bool { return count(pb, "t") == 4 }, 5*time.Second, 10*time.Millisecond)
	// Twice more with nothing written in between: the rebuilt server's
	// binlog is empty when it is promoted.
	for i := 0; i < 2; i++ {
		_, err = fo.FailPrimary(ctx)
		require.NoError(t, err)
		require.NoError(t, fo.Rejoin(ctx))
	}
	_, err = pa.Exec("INSERT INTO t VALUES (8)")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(pb, "t") == 5 }, 5*time.Second, 10*time.Millisecond)
	b2, err := os.ReadFile(filepath.Join(cl.(*mysqlReplicated).nodes[1].dir, "harness.log"))
	require.NoError(t, err)
	require.Contains(t, string(b2), "rebuilt from a dump of mysql-1")
}

// The generic server faults: a killed replica resumes replication after its
// restart; a killed primary keeps its committed rows.
func TestMySQLKillRestart(t *testing.T) {
	needMariaDB(t, "mysql-replicated")
	t.Parallel()
	ctx := context.Background()
	cl := startTopology(t, "mysql-replicated", runDir(t), nil)
	p, r := cl.Nodes()[0], cl.Nodes()[1]
	pa, pb := client(t, cl.Addrs()[0]), client(t, cl.Addrs()[1])
	_, err := pa.Exec("CREATE TABLE t (id INT PRIMARY KEY)")
	require.NoError(t, err)
	require.NoError(t, r.Kill())
	_, err = pa.Exec("INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	require.NoError(t, r.Restart(ctx))
	require.Eventually(t, func() bool { return count(pb, "t") == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, p.Kill())
	require.NoError(t, p.Restart(ctx))
	require.Equal(t, 1, count(pa, "t"))
	_, err = pa.Exec("INSERT INTO t VALUES (2)")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(pb, "t") == 2 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, p.Pause())
	require.NoError(t, p.Resume())
	require.Equal(t, 2, count(pa, "t"))
}

func count(db *sql.DB, table string) int {
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		return -1
	}
	return n
}

func TestDumpGTID(t *testing.T) {
	pos, ok := dumpGTID("--\n-- SET GLOBAL gtid_slave_pos='0-2-17';\n")
	require.True(t, ok)
	require.Equal(t, "0-2-17", pos)
	_, ok = dumpGTID("-- nothing")
	require.False(t, ok)
	require.True(t, strings.HasPrefix(mariadbVersionOr(t), "MariaDB "))
}

func mariadbVersionOr(t *testing.T) string {
	if _, err := exec.LookPath("mariadbd"); err != nil {
		return "MariaDB (not installed)"
	}
	return mariadbVersion()
}

// Under the clock shim the server's NOW() follows ShiftClock, and goes
// back when the offset returns to 0.
func TestMySQLClockShim(t *testing.T) {
	needMariaDB(t, "mysql")
	testenv.Require(t, clusters.CheckClockShim())
	t.Parallel()
	cl, err := Backend{}.Start(context.Background(), clusters.Spec{Topology: "mysql", Dir: runDir(t), ClockShim: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	db := client(t, cl.Addrs()[0])
	skew := func() time.Duration {
		var now float64
		require.NoError(t, db.QueryRow("SELECT UNIX_TIMESTAMP(NOW(6))").Scan(&now))
		return time.Duration(now*1e9) - time.Duration(time.Now().UnixNano())
	}
	require.InDelta(t, 0, skew().Seconds(), 0.5)
	n := cl.Nodes()[0].(clusters.ClockShifter)
	require.NoError(t, n.ShiftClock(90*time.Second))
	require.InDelta(t, 90, skew().Seconds(), 0.5)
	now, err := cl.Nodes()[0].(clusters.ClockReader).ReadClock(context.Background())
	require.NoError(t, err)
	require.InDelta(t, 90, time.Until(now).Seconds(), 0.5, "ReadClock tells the shifted clock")
	require.NoError(t, n.ShiftClock(-30*time.Second))
	require.InDelta(t, -30, skew().Seconds(), 0.5)
	require.NoError(t, n.ShiftClock(0))
	require.InDelta(t, 0, skew().Seconds(), 0.5)
}
