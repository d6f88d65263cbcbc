package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/sys/unix"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/recipe"
)

// The MySQL topologies run Debian's MariaDB: "mysql", one private server,
// and "mysql-replicated", a primary and an asynchronous replica (row-based
// binlog, GTID) that the failover fault promotes.
//
// Every server is the run's own: a datadir initialised by
// mariadb-install-db under the run directory (servers/mysql-N/data, owned
// by the mysql user when locktest runs as root), its own unix socket in the
// datadir and its own TCP address; no option file is read (--no-defaults),
// so the machine's own MariaDB and its configuration are never touched. The
// harness administers a server over its socket as the OS user (unix_socket
// authentication); clients log in over TCP as mysqlUser, which has every
// privilege on mysqlDatabase and none beyond, so read_only holds it off a
// replica. Setup statements are not binlogged: both servers of
// mysql-replicated start with the same empty database and no GTID history.
//
// A killed server restarts on its datadir (InnoDB crash recovery): unlike
// Redis, the committed rows survive; sessions, open transactions, row
// locks and GET_LOCK locks do not. The datadir is removed when the cluster
// stops, unless --param keep_datadir=true.
const (
	mysqlUser       = recipe.MySQLUser
	mysqlPassword   = recipe.MySQLPassword
	mysqlDatabase   = recipe.MySQLDatabase
	mysqlReadyLimit = recipe.MySQLReadyLimit
	mysqlStopLimit  = recipe.MySQLStopLimit
	mysqlSyncLimit  = recipe.MySQLSyncLimit
)

// Param documents one --param setting.
type Param = recipe.Param

// Params lists the --param settings the topologies read, for `locktest
// list` and the README.
var Params = recipe.Params

type mysqlSettings = recipe.MySQLSettings

func mysqlSettingsFrom(p map[string]string) (mysqlSettings, error) {
	return recipe.MySQLSettingsFrom(p)
}

func startMySQL(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	c, err := newMySQLCluster(ctx, s, 1)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func startMySQLReplicated(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	c, err := newMySQLCluster(ctx, s, 2)
	if err != nil {
		return nil, err
	}
	r := &mysqlReplicated{mysqlCluster: c}
	if err := c.nodes[1].replicateFrom(ctx, c.nodes[0], ""); err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return r, nil
}

// newMySQLCluster initialises and starts count servers in parallel; the
// first is the primary, the others start read-only.
func newMySQLCluster(ctx context.Context, s clusters.Spec, count int) (*mysqlCluster, error) {
	set, err := mysqlSettingsFrom(s.Params)
	if err != nil {
		return nil, err
	}
	c := &mysqlCluster{servers: servers[*mysqlNode]{topology: s.Topology, version: mariadbVersion}}
	for i := 1; i <= count; i++ {
		name := fmt.Sprintf("mysql-%d", i)
		n := &mysqlNode{procNode: procNode{name: name, dir: filepath.Join(s.Dir, "servers", name), tracker: s.Tracker, stopLimit: mysqlStopLimit}, serverID: i, set: set, readOnly: i > 1, sockFD: -1, clockShim: s.ClockShim}
		if s.Net != nil {
			h, err := s.Net.AddHost(name)
			if err != nil {
				return nil, err
			}
			n.host = h
		}
		c.nodes = append(c.nodes, n)
	}
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.prepare(ctx); err != nil {
				errs[i] = err
				return
			}
			if err := n.start(ctx, 0); err != nil {
				errs[i] = err
				return
			}
			errs[i] = n.bootstrap(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return c, nil
}

// mysqlCluster is a started MySQL topology; nodes[primary] takes writes.
type mysqlCluster struct {
	// Stop stops every server in parallel (SIGTERM, SIGKILL after 10 s)
	// and removes their datadirs unless keep_datadir is set.
	servers[*mysqlNode]

	mu      sync.Mutex
	primary int
}

// Primary returns the server that takes writes now.
func (c *mysqlCluster) Primary() clusters.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[c.primary]
}

// Addrs lists the servers' TCP addresses, the primary first. A client that
// cannot write to one moves on to the next.
func (c *mysqlCluster) Addrs() []string {
	c.mu.Lock()
	p := c.primary
	c.mu.Unlock()
	out := []string{c.nodes[p].Addr()}
	for i, n := range c.nodes {
		if i != p {
			out = append(out, n.Addr())
		}
	}
	return out
}

// Admin returns the primary's administrator account (the OS user over the
// server's unix socket), for tests and tools.
func (c *mysqlCluster) Admin() *sql.DB {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[c.primary].admin
}

// mysqlReplicated is mysql-replicated: a primary, a replica, and the
// failover an operator (or an operator's tool) would do by hand.
type mysqlReplicated struct {
	*mysqlCluster

	fmu    sync.Mutex // one FailPrimary or Rejoin at a time
	failed *mysqlNode // the primary FailPrimary killed, until Rejoin
	lost   bool       // the last promoted replica lacked committed writes
}

var (
	_ clusters.Failoverer = (*mysqlReplicated)(nil)
	_ clusters.Lagger     = (*mysqlReplicated)(nil)
)

// FailPrimary kills the primary with SIGKILL and promotes the replica the
// way a hurried operator does: STOP SLAVE; RESET SLAVE ALL; SET GLOBAL
// read_only=0. It does not wait for the replica to apply what it received
// but had not applied yet: RESET SLAVE ALL discards that relay log, and
// with it whatever the primary committed last. The line says what the
// replica had received and applied when it was promoted.
func (c *mysqlReplicated) FailPrimary(ctx context.Context) (string, error) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	if c.failed != nil {
		return "", fmt.Errorf("%s, the last failed primary, has not rejoined", c.failed.name)
	}
	c.mu.Lock()
	pi := c.primary
	c.mu.Unlock()
	p, r := c.nodes[pi], c.nodes[1-pi]
	line, lost, err := recipe.MySQLFailPrimary(ctx, p, r, "kill -9")
	if err != nil {
		return "", err
	}
	c.lost = lost
	r.setReadOnly(false)
	p.setReadOnly(true) // it comes back as a replica
	c.mu.Lock()
	c.primary = 1 - pi
	c.mu.Unlock()
	c.failed = p
	return line, nil
}

// Rejoin restarts the failed primary on its old datadir, stale and holding
// transactions the new primary never saw, and makes it a replica of the new
// primary the way an operator rebuilds one: it drops its copy of the
// database, loads a consistent dump of the new primary's (mariadb-dump
// --single-transaction --gtid), forgets its own binlog (RESET MASTER) and
// replicates from the dump's GTID position. It keeps read_only on all the
// while.
func (c *mysqlReplicated) Rejoin(ctx context.Context) error {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	old := c.failed
	if old == nil {
		return nil
	}
	c.mu.Lock()
	np := c.nodes[c.primary]
	c.mu.Unlock()
	if old.PID() == 0 {
		if err := old.Restart(ctx); err != nil {
			return fmt.Errorf("rejoin %s: %w", old.name, err)
		}
	}
	stale, _ := old.queryString(ctx, "SELECT @@global.gtid_binlog_pos")
	old.logf("rejoin: restarted with its old data; its own binlog ends at %s", gtidOrNone(stale))
	if err := old.rebuildFrom(ctx, np); err != nil {
		return fmt.Errorf("rejoin %s: %w", old.name, err)
	}
	c.failed = nil
	return nil
}

// replica returns the server that replicates now.
func (c *mysqlReplicated) replica() *mysqlNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[1-c.primary]
}

// HoldBackReplica stops the replica's applier once it has caught up
// (recipe.MySQLHoldBack).
func (c *mysqlReplicated) HoldBackReplica(ctx context.Context) error {
	c.mu.Lock()
	p, r := c.nodes[c.primary], c.nodes[1-c.primary]
	c.mu.Unlock()
	return recipe.MySQLHoldBack(ctx, p, r)
}

// ResumeReplica starts the replica's applier again.
func (c *mysqlReplicated) ResumeReplica(ctx context.Context) error {
	return c.replica().exec(ctx, recipe.MySQLResume)
}

// LostWrites reports whether the last promotion lost committed writes.
func (c *mysqlReplicated) LostWrites() bool {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.lost
}

func gtidOrNone(s string) string { return recipe.GTIDOrNone(s) }

// mysqlNode is one mariadbd. It launches itself; procNode handles the
// process (its dir is servers/<name>: logs, and the datadir below it; its
// mu guards readOnly and port too).
type mysqlNode struct {
	procNode
	serverID int
	set      mysqlSettings

	datadir string // set by prepare
	tmpdir  string // the server's own tmpdir, beside the datadir
	tmpBase string // a datadir outside the run directory (see prepare), "" if none
	sockFD  int    // O_PATH handle on the datadir: the admin socket is reached through it
	admin   *sql.DB

	clockShim bool   // run mariadbd under the clock shim (see clusters.FaketimeLib)
	clockFile string // the shim's offset file, beside the datadir (set by prepare)

	readOnly bool // start with --read-only
	port     int
}

// Probe says whether the server runs and greets a client (clusters.Prober).
func (n *mysqlNode) Probe(context.Context) error {
	return probe(n.name, n.PID(), func() error { return recipe.MySQLGreets(hostDial(n.host), n.name, n.Addr()) })
}

func (n *mysqlNode) ip() string {
	if n.host != nil {
		return n.host.IP
	}
	return "127.0.0.1"
}

func (n *mysqlNode) setReadOnly(b bool) {
	n.mu.Lock()
	n.readOnly = b
	n.mu.Unlock()
}

// logf appends a line to the node's harness log (harness.log beside
// mariadb.log).
func (n *mysqlNode) logf(format string, a ...any) {
	f, err := os.OpenFile(filepath.Join(n.dir, "harness.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}

// mysqlAccount returns the uid and gid of the mysql user when locktest runs
// as root (the server then drops to that user), ok false otherwise (the
// server runs as the current user).
func mysqlAccount() (uid, gid int, ok bool, err error) {
	if os.Geteuid() != 0 {
		return 0, 0, false, nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return 0, 0, false, fmt.Errorf("user mysql not found (is mariadb-server installed?): %w", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, true, nil
}

// blockedFor names the first directory on the way to dir that the given
// user cannot search, or "" when every one can be.
func blockedFor(dir string, uid, gid int) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return p
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return p
		}
		m := fi.Mode().Perm()
		if m&0o001 == 0 && !(int(st.Uid) == uid && m&0o100 != 0) && !(int(st.Gid) == gid && m&0o010 != 0) {
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// prepare creates the datadir and initialises it with mariadb-install-db.
// The datadir is servers/<name>/data. When locktest runs as root, the
// server runs as the mysql user, which must be able to reach it; if a
// directory on the way is closed to it (a private /root or test temp
// directory), the datadir goes to a fresh directory under the system temp
// directory instead, linked from servers/<name>/data, removed at Stop and
// recorded for `locktest cleanup`.
func (n *mysqlNode) prepare(ctx context.Context) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	// The server changes to its datadir: every path it is given is absolute.
	abs, err := filepath.Abs(n.dir)
	if err != nil {
		return err
	}
	n.dir = abs
	uid, gid, asRoot, err := mysqlAccount()
	if err != nil {
		return err
	}
	n.datadir, n.tmpdir = filepath.Join(n.dir, "data"), filepath.Join(n.dir, "tmp")
	if asRoot {
		if b := blockedFor(n.dir, uid, gid); b != "" {
			base, err := os.MkdirTemp("", "locktest-"+n.name+"-")
			if err != nil {
				return err
			}
			n.tracker.AddPath(base)
			n.tmpBase = base
			if err := os.Chmod(base, 0o755); err != nil {
				return err
			}
			n.datadir, n.tmpdir = filepath.Join(base, "data"), filepath.Join(base, "tmp")
			if err := os.Symlink(n.datadir, filepath.Join(n.dir, "data")); err != nil {
				return err
			}
			n.logf("the mysql user cannot search %s: the datadir is %s instead", b, n.datadir)
		}
	}
	if n.tmpBase == "" && !n.set.KeepData {
		// Removed when the cluster stops; if the run dies first,
		// `locktest cleanup` removes them (the tmpBase is recorded above).
		n.tracker.AddPath(n.datadir)
		n.tracker.AddPath(n.tmpdir)
	}
	// A tmpdir of its own: a starting server deletes every #sql* file in
	// its tmpdir, which in a shared /tmp may be another server's.
	for _, d := range []string{n.datadir, n.tmpdir} {
		if err := os.Mkdir(d, 0o750); err != nil {
			return err
		}
		if asRoot {
			if err := os.Chown(d, uid, gid); err != nil {
				return err
			}
		}
	}
	args := []string{"--no-defaults", "--datadir=" + n.datadir, "--tmpdir=" + n.tmpdir}
	args = append(args, recipe.MySQLInstallFlags...)
	if asRoot {
		args = append(args, "--user=mysql")
	}
	logPath := filepath.Join(n.dir, "install.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, "mariadb-install-db", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The script starts its own mariadbd --bootstrap: kill the whole group.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mariadb-install-db for %s: %w: %s", n.name, err, lastLines(logPath, 3))
	}
	n.logf("mariadb-install-db initialised %s in %s", n.datadir, time.Since(t0).Round(time.Millisecond))
	fd, err := unix.Open(n.datadir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	n.sockFD = fd
	n.admin = n.openAdmin()
	if n.clockShim {
		// In the server's own tmpdir: the mysql user reaches it.
		n.clockFile = filepath.Join(n.tmpdir, "clock-offset")
		if err := os.WriteFile(n.clockFile, []byte("+0\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ShiftClock sets the server's wall clock (NOW(), CURRENT_TIMESTAMP,
// UNIX_TIMESTAMP()) to real time + offset, through the clock shim.
func (n *mysqlNode) ShiftClock(offset time.Duration) error {
	if n.clockFile == "" {
		return fmt.Errorf("%s %w", n.name, clusters.ErrNoClockShim)
	}
	return writeClockOffset(n.clockFile, offset)
}

// ReadClock asks the server for its wall clock (@@timestamp: no time zone
// in the way, as UNIX_TIMESTAMP(NOW()) has in a fall-back hour).
func (n *mysqlNode) ReadClock(ctx context.Context) (time.Time, error) {
	if n.admin == nil {
		return time.Time{}, fmt.Errorf("%s is not running", n.name)
	}
	var us int64
	if err := n.admin.QueryRowContext(ctx, "SELECT CAST(@@timestamp * 1000000 AS SIGNED)").Scan(&us); err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(us), nil
}

// shimEnv is the environment that starts a server under the clock shim
// with its offset in file: libfaketime behind glibc's debug malloc (see
// clusters.FaketimeLib), re-reading the file at every call, monotonic
// clocks untouched.
func shimEnv(file string) []string {
	return []string{
		"LD_PRELOAD=" + clusters.MallocDebugLib + ":" + clusters.FaketimeLib,
		"FAKETIME_TIMESTAMP_FILE=" + file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// writeClockOffset replaces the shim's offset file at once.
func writeClockOffset(file string, offset time.Duration) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%+.3f\n", offset.Seconds())), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// openAdmin returns the pool of admin connections: the OS user over the
// server's unix socket. The socket lives in the datadir, whose path may be
// longer than a socket address can be: it is reached through the open
// handle on the datadir (/proc/self/fd/N/mysqld.sock).
func (n *mysqlNode) openAdmin() *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	if os.Geteuid() != 0 {
		if u, err := user.Current(); err == nil {
			cfg.User = u.Username
		}
	}
	cfg.Net = "unix"
	cfg.Addr = fmt.Sprintf("/proc/self/fd/%d/mysqld.sock", n.sockFD)
	cfg.Timeout = 2 * time.Second
	cfg.InterpolateParams = true
	cfg.Logger = log.New(io.Discard, "", 0)
	conn, _ := mysql.NewConnector(cfg)
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Second)
	return db
}

func (n *mysqlNode) argv(port int) []string {
	n.mu.Lock()
	ro := n.readOnly
	n.mu.Unlock()
	args := []string{"mariadbd", "--no-defaults",
		"--datadir=" + n.datadir, "--tmpdir=" + n.tmpdir, "--socket=mysqld.sock", "--pid-file=mysqld.pid",
		"--bind-address=" + n.ip(), "--port=" + strconv.Itoa(port),
	}
	args = append(args, recipe.MariadbdFlags(n.set, n.serverID)...)
	if os.Geteuid() == 0 {
		args = append(args, "--user=mysql")
	}
	if ro {
		args = append(args, "--read-only")
	}
	if n.host != nil {
		args = n.host.Command(args...)
	}
	return args
}

// start runs mariadbd on port (0: pick a free one) and waits until it
// answers on its socket.
func (n *mysqlNode) start(ctx context.Context, port int) error {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		p := port
		if p == 0 && n.host != nil {
			p = 3306 // the namespace is the node's own
		} else if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return err
			}
		}
		if err := n.launch(ctx, p); err != nil {
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			if port != 0 {
				// The same port is needed (restart): wait for it to free.
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		return nil
	}
	return fmt.Errorf("start %s: %w", n.name, lastErr)
}

func (n *mysqlNode) launch(ctx context.Context, port int) error {
	logPath := filepath.Join(n.dir, "mariadb.log")
	sp := spawn{argv: n.argv(port), log: logPath, clockFile: n.clockFile,
		started: func() { n.port, n.addr = port, net.JoinHostPort(n.ip(), strconv.Itoa(port)) }}
	if n.clockFile != "" {
		sp.env = shimEnv(n.clockFile)
	}
	cmd, exited, err := n.spawn(sp)
	if err != nil {
		return err
	}

	t0 := time.Now()
	deadline := t0.Add(mysqlReadyLimit)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := n.admin.PingContext(pctx)
		cancel()
		if err == nil {
			n.logf("mariadbd (pid %d) on %s answered after %s", cmd.Process.Pid, n.Addr(), time.Since(t0).Round(time.Millisecond))
			return nil
		}
		select {
		case <-exited:
			n.mu.Lock()
			n.cmd = nil
			n.mu.Unlock()
			n.tracker.RemoveProc(cmd.Process.Pid)
			return fmt.Errorf("mariadbd exited at start: %s", lastLines(logPath, 3))
		case <-ctx.Done():
			n.kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.kill()
			return fmt.Errorf("mariadbd %s did not answer within %s: %s", n.name, mysqlReadyLimit, lastLines(logPath, 3))
		}
	}
}

// bootstrap creates the database and the two accounts, on this server only
// (not binlogged).
func (n *mysqlNode) bootstrap(ctx context.Context) error {
	return n.exec(ctx, recipe.MySQLBootstrap()...)
}

// exec runs statements in order on one admin session.
func (n *mysqlNode) exec(ctx context.Context, stmts ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := n.admin.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	defer c.Close()
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", n.name, firstWords(s), err)
		}
	}
	return nil
}

func (n *mysqlNode) queryString(ctx context.Context, q string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var s sql.NullString
	err := n.admin.QueryRowContext(ctx, q).Scan(&s)
	return s.String, err
}

func firstWords(s string) string { return recipe.FirstWords(s) }

// replicaStatus returns SHOW SLAVE STATUS as column -> value (empty when
// the server replicates from nobody).
func (n *mysqlNode) replicaStatus(ctx context.Context) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := n.admin.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, fmt.Errorf("%s: show slave status: %w", n.name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, c := range cols {
			out[c] = string(vals[i])
		}
	}
	return out, rows.Err()
}

// replicateFrom makes n a replica of p from GTID position pos ("" is the
// start of p's binlog), and waits until both replication threads run.
func (n *mysqlNode) replicateFrom(ctx context.Context, p *mysqlNode, pos string) error {
	_, port, _ := net.SplitHostPort(p.Addr())
	st, err := recipe.MySQLReplicateFrom(ctx, n, p.name, p.ip(), port, n.set.ReplicaDelay, pos)
	if err != nil {
		return err
	}
	n.logf("replicating from %s (%s), received %s", p.name, p.Addr(), gtidOrNone(st["Gtid_IO_Pos"]))
	return nil
}

// Exec, QueryString and ReplicaStatus make the node a recipe.MySQLServer.
func (n *mysqlNode) Exec(ctx context.Context, stmts ...string) error { return n.exec(ctx, stmts...) }
func (n *mysqlNode) QueryString(ctx context.Context, q string) (string, error) {
	return n.queryString(ctx, q)
}
func (n *mysqlNode) ReplicaStatus(ctx context.Context) (map[string]string, error) {
	return n.replicaStatus(ctx)
}

// rebuildFrom replaces n's copy of the database with a consistent dump of
// p's and makes n replicate from p at the dump's GTID position. Nothing of
// it is binlogged on n, and RESET MASTER forgets what n wrote before.
func (n *mysqlNode) rebuildFrom(ctx context.Context, p *mysqlNode) error {
	_ = n.exec(ctx, "STOP SLAVE")
	if err := n.exec(ctx, "RESET SLAVE ALL"); err != nil {
		return err
	}
	var dump, dumpErr strings.Builder
	d := exec.CommandContext(ctx, "mariadb-dump", append([]string{"--no-defaults", "--socket=mysqld.sock", "--user=" + adminUser()},
		recipe.MySQLDumpFlags...)...)
	d.Dir = p.datadir // the socket path is relative: it may be too long to give whole
	d.Stdout, d.Stderr = &dump, &dumpErr
	if err := d.Run(); err != nil {
		return fmt.Errorf("mariadb-dump of %s: %w: %s", p.name, err, strings.TrimSpace(dumpErr.String()))
	}
	pos, ok := dumpGTID(dump.String())
	if !ok {
		// An empty binlog state: the dump holds everything p has
		// written, and n replicates p's binlog from its start.
		pos = ""
	}
	var loadErr strings.Builder
	l := exec.CommandContext(ctx, "mariadb", "--no-defaults", "--socket=mysqld.sock", "--user="+adminUser(),
		"--init-command=SET SESSION sql_log_bin=0", "--binary-mode")
	l.Dir = n.datadir
	l.Stdin = strings.NewReader(dump.String())
	l.Stderr = &loadErr
	if err := l.Run(); err != nil {
		return fmt.Errorf("load the dump of %s into %s: %w: %s", p.name, n.name, err, strings.TrimSpace(loadErr.String()))
	}
	if err := n.exec(ctx, "RESET MASTER"); err != nil {
		return err
	}
	if err := n.replicateFrom(ctx, p, pos); err != nil {
		return err
	}
	n.logf("rejoin: rebuilt from a dump of %s at %s (%d bytes)", p.name, gtidOrNone(pos), dump.Len())
	return nil
}

func dumpGTID(dump string) (string, bool) { return recipe.DumpGTID(dump) }

func adminUser() string {
	if os.Geteuid() != 0 {
		if u, err := user.Current(); err == nil {
			return u.Username
		}
	}
	return "root"
}

// Restart starts the server again on its old port and its datadir: InnoDB
// recovers every committed transaction; sessions and their locks are gone.
// A replica resumes replicating where it stopped.
func (n *mysqlNode) Restart(ctx context.Context) error {
	if n.PID() != 0 {
		return fmt.Errorf("%s is still running", n.name)
	}
	n.mu.Lock()
	port := n.port
	n.mu.Unlock()
	return n.start(ctx, port)
}

// stop resumes the server if paused, asks it to shut down (SIGTERM), kills
// it after mysqlStopLimit, and removes the datadir unless kept.
func (n *mysqlNode) stop(ctx context.Context) error {
	_ = n.procNode.stop(ctx) // (stopLimit: mysqlStopLimit)
	if n.admin != nil {
		_ = n.admin.Close()
	}
	if n.sockFD >= 0 {
		_ = unix.Close(n.sockFD)
		n.sockFD = -1
	}
	if n.datadir == "" || n.set.KeepData {
		return nil
	}
	if n.tmpBase != "" {
		_ = os.Remove(filepath.Join(n.dir, "data"))
		return os.RemoveAll(n.tmpBase)
	}
	return errors.Join(os.RemoveAll(n.datadir), os.RemoveAll(n.tmpdir))
}

var (
	mariadbOnce sync.Once
	mariadbVer  string
)

func mariadbVersion() string {
	mariadbOnce.Do(func() {
		out, err := exec.Command("mariadbd", "--version").Output()
		if err != nil {
			mariadbVer = "mariadbd (version unknown)"
			return
		}
		f := strings.Fields(string(out))
		for i, w := range f {
			if w == "Ver" && i+1 < len(f) {
				mariadbVer = "MariaDB " + f[i+1]
				return
			}
		}
		mariadbVer = strings.TrimSpace(string(out))
	})
	return mariadbVer
}
