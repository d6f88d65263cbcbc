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
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/runstate"
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
	// The account clients use (locks/mysql.go has the same).
	mysqlUser     = "locktest"
	mysqlPassword = "locktest"
	mysqlDatabase = "locktest"
	// The account the replica replicates with.
	mysqlReplUser     = "locktest_repl"
	mysqlReplPassword = "locktest-repl-secret"

	mysqlReadyLimit = 60 * time.Second // start-up, crash recovery included
	mysqlStopLimit  = 10 * time.Second // SIGTERM, then SIGKILL
	mysqlSyncLimit  = 15 * time.Second // replication threads running
)

// Param documents one --param setting.
type Param struct {
	Name, Default string
	For           string // the topologies or schemes that read it
	Summary       string
}

// Params lists the --param settings the local backend's topologies read,
// for `locktest list` and the README.
var Params = []Param{
	{"wait_timeout", "2", "mysql, mysql-replicated",
		"seconds a server keeps an idle connection: a holder of mysql-for-update or mysql-get-lock paused longer loses its lock with its connection"},
	{"innodb_lock_wait_timeout", "1", "mysql, mysql-replicated",
		"seconds a statement waits for another's row lock before it fails (MariaDB's own default is 50); 0 makes even a release fail when it meets a concurrent insert's lock"},
	{"lock_wait", "0", "mysql-for-update, mysql-get-lock",
		"seconds an acquire waits in the server for a held lock: 0 is a try-lock (FOR UPDATE NOWAIT, GET_LOCK(name, 0)), N is FOR UPDATE WAIT N, GET_LOCK(name, N)"},
	{"replica_delay", "0", "mysql-replicated",
		"seconds the replica lags on purpose (MASTER_DELAY): a failover then loses every transaction of the last replica_delay seconds"},
	{"keep_datadir", "false", "mysql, mysql-replicated",
		"keep the servers' datadirs (binlogs included) in the run directory after the run"},
}

// mysqlSettings are the --param settings of the MySQL topologies.
type mysqlSettings struct {
	waitTimeout  int // wait_timeout, seconds
	lockWait     int // innodb_lock_wait_timeout, seconds
	replicaDelay int // MASTER_DELAY of the replica, seconds
	keepData     bool
}

func mysqlSettingsFrom(p map[string]string) (mysqlSettings, error) {
	s := mysqlSettings{waitTimeout: 2, lockWait: 1}
	ints := []struct {
		name string
		min  int
		v    *int
	}{
		{"wait_timeout", 1, &s.waitTimeout},
		{"innodb_lock_wait_timeout", 0, &s.lockWait},
		{"replica_delay", 0, &s.replicaDelay},
	}
	for _, f := range ints {
		v, ok := p[f.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < f.min {
			return s, fmt.Errorf("--param %s=%s: want a whole number of seconds, at least %d", f.name, v, f.min)
		}
		*f.v = n
	}
	if v, ok := p["keep_datadir"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("--param keep_datadir=%s: want true or false", v)
		}
		s.keepData = b
	}
	return s, nil
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
	if s.ClockShim {
		return nil, fmt.Errorf("the %s topology has no clock shim: clock faults need a Redis topology", s.Topology)
	}
	set, err := mysqlSettingsFrom(s.Params)
	if err != nil {
		return nil, err
	}
	c := &mysqlCluster{topology: s.Topology}
	for i := 1; i <= count; i++ {
		name := fmt.Sprintf("mysql-%d", i)
		n := &mysqlNode{name: name, serverID: i, dir: filepath.Join(s.Dir, "servers", name), tracker: s.Tracker, set: set, readOnly: i > 1, sockFD: -1}
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
	topology string
	nodes    []*mysqlNode

	mu      sync.Mutex
	primary int
}

func (c *mysqlCluster) Topology() string { return c.topology }

func (c *mysqlCluster) Nodes() []clusters.Node {
	out := make([]clusters.Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n
	}
	return out
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

func (c *mysqlCluster) Versions() []string {
	v := mariadbVersion()
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.name + ": " + v
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

// Stop stops every server in parallel (SIGTERM, SIGKILL after 10 s) and
// removes their datadirs unless keep_datadir is set.
func (c *mysqlCluster) Stop(ctx context.Context) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// mysqlReplicated is mysql-replicated: a primary, a replica, and the
// failover an operator (or an operator's tool) would do by hand.
type mysqlReplicated struct {
	*mysqlCluster

	fmu    sync.Mutex // one FailPrimary or Rejoin at a time
	failed *mysqlNode // the primary FailPrimary killed, until Rejoin
}

var _ clusters.Failoverer = (*mysqlReplicated)(nil)

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
	if p.PID() == 0 {
		return "", fmt.Errorf("fail primary: %s is down", p.name)
	}
	if r.PID() == 0 {
		return "", fmt.Errorf("fail primary: %s, the replica, is down: nothing to promote", r.name)
	}
	pid := p.PID()
	if err := p.Kill(); err != nil {
		return "", fmt.Errorf("fail primary: %w", err)
	}
	t0 := time.Now()
	st, err := r.replicaStatus(ctx)
	if err != nil {
		return "", fmt.Errorf("promote %s: %w", r.name, err)
	}
	applied, err := r.queryString(ctx, "SELECT @@global.gtid_slave_pos")
	if err != nil {
		return "", fmt.Errorf("promote %s: %w", r.name, err)
	}
	if err := r.exec(ctx, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only=0"); err != nil {
		return "", fmt.Errorf("promote %s: %w", r.name, err)
	}
	r.setReadOnly(false)
	p.setReadOnly(true) // it comes back as a replica
	c.mu.Lock()
	c.primary = 1 - pi
	c.mu.Unlock()
	c.failed = p
	return fmt.Sprintf("killed primary %s (pid %d, kill -9); promoted %s %s later (STOP SLAVE; RESET SLAVE ALL; read_only=0): it had received %s and applied %s; anything later is lost",
		p.name, pid, r.name, time.Since(t0).Round(time.Millisecond), gtidOrNone(st["Gtid_IO_Pos"]), gtidOrNone(applied)), nil
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

func gtidOrNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return "GTID " + s
}

// mysqlNode is one mariadbd.
type mysqlNode struct {
	name     string
	serverID int
	dir      string // servers/<name>: logs, and the datadir below it
	tracker  *runstate.Tracker
	host     *netns.Host
	set      mysqlSettings

	datadir string // set by prepare
	tmpdir  string // the server's own tmpdir, beside the datadir
	tmpBase string // a datadir outside the run directory (see prepare), "" if none
	sockFD  int    // O_PATH handle on the datadir: the admin socket is reached through it
	admin   *sql.DB

	mu       sync.Mutex
	readOnly bool // start with --read-only
	port     int
	addr     string
	cmd      *exec.Cmd
	exited   chan struct{}
}

func (n *mysqlNode) Name() string { return n.name }

// Host returns the node's namespace, or nil on loopback.
func (n *mysqlNode) Host() *netns.Host { return n.host }

func (n *mysqlNode) ip() string {
	if n.host != nil {
		return n.host.IP
	}
	return "127.0.0.1"
}

func (n *mysqlNode) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addr
}

func (n *mysqlNode) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
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
	args := []string{"--no-defaults", "--datadir=" + n.datadir, "--tmpdir=" + n.tmpdir,
		"--auth-root-authentication-method=socket", "--skip-test-db",
		"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M"}
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
	return nil
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
		"--server-id=" + strconv.Itoa(n.serverID),
		"--log-bin=binlog", "--binlog-format=ROW", "--log-slave-updates",
		"--relay-log=relay", "--relay-log-recovery",
		"--skip-name-resolve", "--performance-schema=OFF", "--max-connections=1000",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M",
		"--innodb-buffer-pool-dump-at-shutdown=OFF", "--innodb-buffer-pool-load-at-startup=OFF",
		"--wait-timeout=" + strconv.Itoa(n.set.waitTimeout),
		"--innodb-lock-wait-timeout=" + strconv.Itoa(n.set.lockWait),
		// Aborted connections (a client gone, an idle one dropped after
		// wait_timeout) are written to the log.
		"--log-warnings=3",
	}
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
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := n.argv(port)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	n.tracker.AddProc(cmd.Process.Pid, n.name)
	n.mu.Lock()
	n.port, n.addr = port, net.JoinHostPort(n.ip(), strconv.Itoa(port))
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()

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
	return n.exec(ctx,
		"SET SESSION sql_log_bin=0",
		"CREATE DATABASE IF NOT EXISTS "+mysqlDatabase,
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", mysqlUser, mysqlPassword),
		fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", mysqlDatabase, mysqlUser),
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", mysqlReplUser, mysqlReplPassword),
		fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO '%s'@'%%'", mysqlReplUser))
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

// firstWords shortens a statement for an error message, leaving out
// passwords.
func firstWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

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
	stmts := []string{"STOP SLAVE", "RESET SLAVE ALL", fmt.Sprintf("SET GLOBAL gtid_slave_pos='%s'", pos)}
	stmts = append(stmts,
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_DELAY=%d",
			p.ip(), port, mysqlReplUser, mysqlReplPassword, n.set.replicaDelay),
		"START SLAVE")
	if err := n.exec(ctx, stmts...); err != nil {
		return fmt.Errorf("replicate %s from %s: %w", n.name, p.name, err)
	}
	deadline := time.Now().Add(mysqlSyncLimit)
	for {
		st, err := n.replicaStatus(ctx)
		if err != nil {
			return err
		}
		if st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
			n.logf("replicating from %s (%s), received %s", p.name, p.Addr(), gtidOrNone(st["Gtid_IO_Pos"]))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replicate %s from %s: threads not running after %s (io %q %s, sql %q %s)", n.name, p.name, mysqlSyncLimit,
				st["Slave_IO_Running"], st["Last_IO_Error"], st["Slave_SQL_Running"], st["Last_SQL_Error"])
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
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
	d := exec.CommandContext(ctx, "mariadb-dump", "--no-defaults", "--socket=mysqld.sock", "--user="+adminUser(),
		"--single-transaction", "--gtid", "--master-data=2", "--add-drop-database", "--skip-dump-date",
		"--databases", mysqlDatabase)
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

// dumpGTID finds the GTID position mariadb-dump --gtid --master-data=2
// writes as a comment, -- SET GLOBAL gtid_slave_pos='0-1-42'; it writes
// none when the server's binlog state is empty.
func dumpGTID(dump string) (string, bool) {
	const marker = "gtid_slave_pos='"
	i := strings.Index(dump, marker)
	if i < 0 {
		return "", false
	}
	rest := dump[i+len(marker):]
	j := strings.IndexByte(rest, '\'')
	if j < 0 {
		return "", false
	}
	return rest[:j], true
}

func adminUser() string {
	if os.Geteuid() != 0 {
		if u, err := user.Current(); err == nil {
			return u.Username
		}
	}
	return "root"
}

// Pause freezes the server and returns once it is stopped.
func (n *mysqlNode) Pause() error {
	pid := n.PID()
	if pid == 0 {
		return fmt.Errorf("%s is not running", n.name)
	}
	if err := proc.Stop(pid); err != nil {
		return fmt.Errorf("pause %s: %w", n.name, err)
	}
	return nil
}

// Resume continues a paused server.
func (n *mysqlNode) Resume() error {
	pid := n.PID()
	if pid == 0 {
		return fmt.Errorf("%s is not running", n.name)
	}
	if err := proc.Cont(pid); err != nil {
		return fmt.Errorf("resume %s: %w", n.name, err)
	}
	return nil
}

// Kill sends SIGKILL and waits until the process is gone.
func (n *mysqlNode) Kill() error {
	if n.PID() == 0 {
		return fmt.Errorf("%s is not running", n.name)
	}
	n.kill()
	return nil
}

func (n *mysqlNode) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	<-exited
	n.tracker.RemoveProc(cmd.Process.Pid)
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
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd != nil {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(mysqlStopLimit):
			_ = cmd.Process.Kill()
			<-exited
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
		}
		n.tracker.RemoveProc(cmd.Process.Pid)
	}
	if n.admin != nil {
		_ = n.admin.Close()
	}
	if n.sockFD >= 0 {
		_ = unix.Close(n.sockFD)
		n.sockFD = -1
	}
	if n.datadir == "" || n.set.keepData {
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
