package docker

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/recipe"
)

// MariaDB on docker. The container initialises its datadir with
// mariadb-install-db on its first start and runs mariadbd with the local
// backend's flags (recipe.MariadbdFlags); an init file creates the database
// and the accounts of the local backend at every start (not binlogged),
// plus an administrator account the harness uses over TCP, since it cannot
// reach the server's socket. The datadir is in the container (or the
// official image's volume, removed with it): a killed server restarts on
// it, as on the local backend.
const (
	mysqlAdminUser     = "locktest_admin"
	mysqlAdminPassword = "locktest-admin-secret"
	// mysqlRoleFile says "primary" or "replica": a replica starts
	// read-only. The failover rewrites it.
	mysqlRoleFile = "/etc/locktest/role"
)

// mysqlInitSQL is the init file: one statement a line.
func mysqlInitSQL() string {
	stmts := append(recipe.MySQLBootstrap(),
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", mysqlAdminUser, mysqlAdminPassword),
		fmt.Sprintf("GRANT ALL ON *.* TO '%s'@'%%' WITH GRANT OPTION", mysqlAdminUser))
	return strings.Join(stmts, ";\n") + ";\n"
}

// mysqlCmd initialises the datadir if it is empty and runs mariadbd.
func mysqlCmd(set recipe.MySQLSettings, serverID int) []string {
	flags := append([]string{"--no-defaults", "--user=mysql", "--datadir=/var/lib/mysql",
		"--socket=/run/mysqld/mysqld.sock", "--pid-file=/run/mysqld/mysqld.pid",
		"--bind-address=0.0.0.0", fmt.Sprintf("--port=%d", portMySQL), "--init-file=/etc/locktest/init.sql"},
		recipe.MariadbdFlags(set, serverID)...)
	script := `set -e
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
if [ ! -d /var/lib/mysql/mysql ]; then
  mariadb-install-db --no-defaults --datadir=/var/lib/mysql --user=mysql ` + strings.Join(recipe.MySQLInstallFlags, " ") + ` >/tmp/install.log 2>&1 || { cat /tmp/install.log >&2; exit 1; }
fi
ro=
if grep -qx replica ` + mysqlRoleFile + ` 2>/dev/null; then ro=--read-only; fi
exec mariadbd ` + strings.Join(flags, " ") + ` $ro`
	return []string{"sh", "-c", script}
}

// mysqlAdmin is the harness's pool of admin connections to one server.
type mysqlAdmin struct {
	addr string
	db   *sql.DB
}

func newMySQLAdmin(addr string) *mysqlAdmin {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = mysqlAdminUser, mysqlAdminPassword, "tcp", addr
	cfg.Timeout = 2 * time.Second
	cfg.InterpolateParams = true
	cfg.Logger = log.New(io.Discard, "", 0)
	conn, _ := mysql.NewConnector(cfg)
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Second)
	return &mysqlAdmin{addr: addr, db: db}
}

func (a *mysqlAdmin) close() { _ = a.db.Close() }

func (a *mysqlAdmin) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return a.db.PingContext(ctx)
}

func (a *mysqlAdmin) version(ctx context.Context) string {
	v, err := a.queryString(ctx, "SELECT VERSION()")
	if err != nil {
		return "MariaDB (version unknown)"
	}
	v, _, _ = strings.Cut(v, "-")
	return "MariaDB " + v
}

// exec runs statements in order on one session.
func (a *mysqlAdmin) exec(ctx context.Context, name string, stmts ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := a.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer c.Close()
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %s: %w", name, recipe.FirstWords(s), err)
		}
	}
	return nil
}

func (a *mysqlAdmin) queryString(ctx context.Context, q string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var s sql.NullString
	err := a.db.QueryRowContext(ctx, q).Scan(&s)
	return s.String, err
}

// replicaStatus returns SHOW SLAVE STATUS as column -> value.
func (a *mysqlAdmin) replicaStatus(ctx context.Context) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := a.db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, fmt.Errorf("show slave status: %w", err)
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

// mysqlReplicated is mysql-replicated on docker: a primary, a replica, and
// the local backend's failover (kill -9 the primary, promote the replica
// as a hurried operator does; the old primary rejoins rebuilt from a dump).
type mysqlReplicated struct {
	*cluster
	set recipe.MySQLSettings

	mu      sync.Mutex
	primary int

	fmu    sync.Mutex
	failed *node
	lost   bool // the last promoted replica lacked committed writes
}

var (
	_ clusters.Failoverer = (*mysqlReplicated)(nil)
	_ clusters.Lagger     = (*mysqlReplicated)(nil)
)

// setUp makes the second server a replica of the first (compose: unless
// it already is one).
func (r *mysqlReplicated) setUp(ctx context.Context) error {
	if len(r.nodes) != 2 {
		return fmt.Errorf("mysql-replicated: %d servers, want 2", len(r.nodes))
	}
	if !r.owned {
		// A stack that already replicates keeps doing so, whichever way
		// round an earlier run's failovers left it.
		for i, n := range r.nodes {
			if st, err := n.mysql.replicaStatus(ctx); err == nil && st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
				r.primary = 1 - i
				return nil
			}
		}
		if err := r.nodes[1].mysql.exec(ctx, r.nodes[1].name, "SET GLOBAL read_only=1"); err != nil {
			return err
		}
	}
	return r.replicateFrom(ctx, r.nodes[1], r.nodes[0], "")
}

// Primary returns the server that takes writes now.
func (r *mysqlReplicated) Primary() clusters.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[r.primary]
}

// Addrs lists the primary first: a client that cannot write to one server
// moves on to the next.
func (r *mysqlReplicated) Addrs() []string {
	r.mu.Lock()
	p := r.primary
	r.mu.Unlock()
	out := []string{r.nodes[p].Addr()}
	for i, n := range r.nodes {
		if i != p {
			out = append(out, n.Addr())
		}
	}
	return out
}

// replicateFrom makes n a replica of p from GTID position pos and waits
// until both replication threads run.
func (r *mysqlReplicated) replicateFrom(ctx context.Context, n, p *node, pos string) error {
	_, err := recipe.MySQLReplicateFrom(ctx, mysqlServer{n}, p.name, p.ip, fmt.Sprint(portMySQL), r.set.ReplicaDelay, pos)
	return err
}

// mysqlServer is a MariaDB node as recipe.MySQLServer: administered over
// TCP.
type mysqlServer struct{ *node }

func (m mysqlServer) Exec(ctx context.Context, stmts ...string) error {
	return m.mysql.exec(ctx, m.name, stmts...)
}
func (m mysqlServer) QueryString(ctx context.Context, q string) (string, error) {
	return m.mysql.queryString(ctx, q)
}
func (m mysqlServer) ReplicaStatus(ctx context.Context) (map[string]string, error) {
	return m.mysql.replicaStatus(ctx)
}

// setRole records whether n starts read-only after its next restart.
func (r *mysqlReplicated) setRole(ctx context.Context, n *node, role string) error {
	if !r.owned {
		return nil // a compose stack's servers start as its file says
	}
	return n.writeFiles(ctx, map[string]string{mysqlRoleFile: role + "\n"})
}

// FailPrimary kills the primary with SIGKILL and promotes the replica
// without waiting for it to apply what it received, as the local backend
// does (recipe.MySQLFailPrimary).
func (r *mysqlReplicated) FailPrimary(ctx context.Context) (string, error) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if r.failed != nil {
		return "", fmt.Errorf("%s, the last failed primary, has not rejoined", r.failed.name)
	}
	r.mu.Lock()
	pi := r.primary
	r.mu.Unlock()
	p, rep := r.nodes[pi], r.nodes[1-pi]
	line, lost, err := recipe.MySQLFailPrimary(ctx, mysqlServer{p}, mysqlServer{rep}, "docker kill")
	if err != nil {
		return "", err
	}
	r.lost = lost
	if err := r.setRole(ctx, rep, "primary"); err != nil {
		return "", err
	}
	if err := r.setRole(ctx, p, "replica"); err != nil {
		return "", err
	}
	r.mu.Lock()
	r.primary = 1 - pi
	r.mu.Unlock()
	r.failed = p
	return line, nil
}

// replica returns the server that replicates now.
func (r *mysqlReplicated) replica() *node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[1-r.primary]
}

// HoldBackReplica stops the replica's applier once it has caught up
// (recipe.MySQLHoldBack), as the local backend does.
func (r *mysqlReplicated) HoldBackReplica(ctx context.Context) error {
	r.mu.Lock()
	p, rep := r.nodes[r.primary], r.nodes[1-r.primary]
	r.mu.Unlock()
	return recipe.MySQLHoldBack(ctx, mysqlServer{p}, mysqlServer{rep})
}

// ResumeReplica starts the replica's applier again.
func (r *mysqlReplicated) ResumeReplica(ctx context.Context) error {
	n := r.replica()
	return n.mysql.exec(ctx, n.name, recipe.MySQLResume)
}

// LostWrites reports whether the last promotion lost committed writes.
func (r *mysqlReplicated) LostWrites() bool {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	return r.lost
}

// Rejoin restarts the failed primary on its old datadir and rebuilds it as
// a replica of the new primary, as the local backend does: a consistent
// dump of the new primary's database loaded into it (mariadb-dump and
// mariadb run inside its container), its own binlog forgotten (RESET
// MASTER), replication from the dump's GTID position.
func (r *mysqlReplicated) Rejoin(ctx context.Context) error {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	old := r.failed
	if old == nil {
		return nil
	}
	r.mu.Lock()
	np := r.nodes[r.primary]
	r.mu.Unlock()
	if old.PID() == 0 {
		if err := old.Restart(ctx); err != nil {
			return fmt.Errorf("rejoin %s: %w", old.name, err)
		}
	}
	// Read-only now, whatever its role file said when it started.
	_ = old.mysql.exec(ctx, old.name, "SET GLOBAL read_only=1", "STOP SLAVE")
	if err := old.mysql.exec(ctx, old.name, "RESET SLAVE ALL"); err != nil {
		return fmt.Errorf("rejoin %s: %w", old.name, err)
	}
	auth := fmt.Sprintf("--user=%s --password=%s", mysqlAdminUser, mysqlAdminPassword)
	script := fmt.Sprintf(`set -e
mariadb-dump --no-defaults --host=%s --port=%d %s %s >/tmp/rejoin.sql
mariadb --no-defaults --host=127.0.0.1 --port=%d %s --binary-mode '--init-command=SET SESSION sql_log_bin=0' </tmp/rejoin.sql
cat /tmp/rejoin.sql | grep -o "gtid_slave_pos='[^']*'" | head -n 1 || true`,
		np.ip, portMySQL, auth, strings.Join(recipe.MySQLDumpFlags, " "), portMySQL, auth)
	out, err := old.exec(ctx, []string{"sh", "-c", script})
	if err != nil {
		return fmt.Errorf("rejoin %s: rebuild from a dump of %s: %w", old.name, np.name, err)
	}
	pos, ok := recipe.DumpGTID(out)
	if !ok {
		pos = ""
	}
	if err := old.mysql.exec(ctx, old.name, "RESET MASTER"); err != nil {
		return fmt.Errorf("rejoin %s: %w", old.name, err)
	}
	if err := r.replicateFrom(ctx, old, np, pos); err != nil {
		return fmt.Errorf("rejoin %s: %w", old.name, err)
	}
	r.failed = nil
	return nil
}
