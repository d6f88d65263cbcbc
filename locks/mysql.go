package locks

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/internal/params"
)

// The MySQL schemes run on MariaDB through github.com/go-sql-driver/mysql,
// each in its own file: mysql_optimistic.go, mysql_forupdate.go,
// mysql_unique.go, mysql_unique_expiry.go, mysql_getlock.go. What they
// share is here: one connection pool per server (Config.Addrs, the primary
// first), the move to the next server when one cannot be reached or is
// read-only, the tables each server is given, and the mapping of errors to
// outcomes:
//
//   - nothing was sent (no connection, a read-only server refused the
//     statement, a statement that cannot grant failed): ErrRejected;
//   - the server said the lock is taken (duplicate key, lock wait timeout,
//     GET_LOCK 0): ErrHeld; a release that changed nothing: ErrNotOwner;
//   - anything else after a statement that could grant or release may have
//     reached the server (a timeout, a connection lost mid-request):
//     ErrIndeterminate.
//
// A lock that lives in a session (mysql-for-update, mysql-get-lock) keeps
// its connection pinned from acquire to release. If the server drops that
// connection meanwhile (wait_timeout while the holder is paused, a crash,
// a failover) the lock is gone on the server, yet nothing tells the client:
// it keeps believing it holds the lock until its release, which runs on the
// same dead connection and is never re-dialled. Connections are only
// dialled, or taken from the pool after a liveness check, when the client
// holds nothing on them.

// mysqlAlso lists the topologies the MySQL schemes run on besides "mysql".
var mysqlAlso = []string{"mysql-replicated"}

// MariaDB error numbers the schemes act on.
const (
	erDupEntry             = 1062 // duplicate key: the lock row exists
	erLockWaitTimeout      = 1205 // a row lock is held (NOWAIT and WAIT n say so too)
	erOptionPrevents       = 1290 // --read-only
	erReadOnlyTransaction  = 1792
	erReadOnlyMode         = 1836
	erLockNowait           = 3572 // MySQL 8's NOWAIT
	mysqlExtraReadDeadline = time.Second
)

// errReadOnly marks a server that refused a write because it is read-only
// (a replica): nothing took effect there, and the next server is tried.
var errReadOnly = errors.New("server is read-only")

type mysqlBase struct {
	cfg Config
	// lockWait is the lock_wait param, in seconds: how long an acquire of
	// mysql-for-update or mysql-get-lock waits inside the server for a held
	// lock (0, the default: not at all, a try-lock).
	lockWait int
	dbs      []*sql.DB
	ready    []bool // the server has the scheme's tables
	cur      int    // the server in use
	schema   func(ctx context.Context, c *sql.Conn) error
}

func newMySQLBase(c Config, schema func(ctx context.Context, c *sql.Conn) error) (*mysqlBase, error) {
	if len(c.Addrs) == 0 {
		return nil, errors.New("mysql scheme needs a server address")
	}
	if c.Server.MySQLUser == "" {
		return nil, errors.New("mysql scheme needs the account the topology made (Config.Server)")
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = time.Second
	}
	b := &mysqlBase{cfg: c, schema: schema, ready: make([]bool, len(c.Addrs))}
	n, _, err := params.Seconds(c.Params, "lock_wait")
	if err != nil {
		return nil, err
	}
	b.lockWait = n
	for _, addr := range c.Addrs {
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.DBName = c.Server.MySQLUser, c.Server.MySQLPassword, c.Server.MySQLDatabase
		cfg.Net, cfg.Addr = "tcp", addr
		cfg.Timeout = c.OpTimeout
		// Each operation has its context deadline; these only back it up.
		cfg.ReadTimeout = b.timeout() + mysqlExtraReadDeadline
		cfg.WriteTimeout = b.timeout() + mysqlExtraReadDeadline
		// One round trip per statement: no server-side prepare.
		cfg.InterpolateParams = true
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(conn)
		db.SetMaxIdleConns(2)
		db.SetConnMaxIdleTime(time.Second)
		b.dbs = append(b.dbs, db)
	}
	return b, nil
}

// timeout is the deadline of one operation: the op timeout plus the time
// an acquire may wait in the server.
func (b *mysqlBase) timeout() time.Duration {
	return b.cfg.OpTimeout + time.Duration(b.lockWait)*time.Second
}

func (b *mysqlBase) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout())
}

func (b *mysqlBase) Close() error {
	var errs []error
	for _, db := range b.dbs {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

func (b *mysqlBase) lease(owner string, start time.Time, token *int64, ttl time.Duration) Lease {
	l := Lease{Owner: owner, Token: token, Acquired: start}
	if ttl > 0 {
		l.ValidUntil = start.Add(ttl)
	}
	return l
}

// attempt runs f on a connection to the first server, from the one in use
// on, that takes it. A server that cannot be reached or given the scheme's
// tables, or that refuses f with errReadOnly, is skipped: nothing took
// effect there. When every server was skipped the error wraps ErrRejected.
// keep hands the connection to the caller when f succeeds (a lock that
// lives in the session); otherwise it goes back to the pool, or is thrown
// away when f failed in a way that may have left it unusable.
//
// Connecting to a server may take only its share of what is left of the
// deadline (half of it for the first of two), as a multi-host connector's
// connect timeout does: a server that died without a reset (a killed
// container: its address answers nothing) would otherwise take the whole
// deadline, and the client would never reach the replica promoted in its
// place while the old primary's address stays silent.
func (b *mysqlBase) attempt(ctx context.Context, keep bool, f func(c *sql.Conn) error) (*sql.Conn, error) {
	var skipped []error
	n := len(b.dbs)
	for i := 0; i < n; i++ {
		idx := (b.cur + i) % n
		c, err := b.connectShare(ctx, idx, n-i)
		if err != nil {
			skipped = append(skipped, fmt.Errorf("%s: %w", b.cfg.Addrs[idx], err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		err = f(c)
		if errors.Is(err, errReadOnly) {
			_ = c.Close()
			skipped = append(skipped, fmt.Errorf("%s: %w", b.cfg.Addrs[idx], err))
			continue
		}
		b.cur = idx
		switch {
		case err == nil && keep:
			return c, nil
		case err == nil, errors.Is(err, ErrHeld), errors.Is(err, ErrNotOwner):
			_ = c.Close()
		default:
			discard(c)
		}
		return nil, err
	}
	return nil, fmt.Errorf("%w: no server took it: %w", ErrRejected, errors.Join(skipped...))
}

// connectShare is connect with at most 1/left of what remains of ctx's
// deadline to connect in (the servers still to try share it).
func (b *mysqlBase) connectShare(ctx context.Context, idx, left int) (*sql.Conn, error) {
	dl, ok := ctx.Deadline()
	if !ok || left <= 1 {
		return b.connect(ctx, idx)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Until(dl)/time.Duration(left))
	defer cancel()
	return b.connect(cctx, idx)
}

// connect takes a connection to server idx (the pool checks a reused one
// is alive) and gives the server the scheme's tables the first time.
func (b *mysqlBase) connect(ctx context.Context, idx int) (*sql.Conn, error) {
	c, err := b.dbs[idx].Conn(ctx)
	if err != nil {
		return nil, err
	}
	if !b.ready[idx] {
		if err := b.schema(ctx, c); err != nil {
			discard(c)
			return nil, fmt.Errorf("create tables: %w", err)
		}
		b.ready[idx] = true
	}
	return c, nil
}

// discard closes c for good instead of returning it to the pool.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

func mysqlErrno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isReadOnlyErr(err error) bool {
	switch mysqlErrno(err) {
	case erOptionPrevents, erReadOnlyTransaction, erReadOnlyMode:
		return true
	}
	return false
}

func isLockWait(err error) bool {
	switch mysqlErrno(err) {
	case erLockWaitTimeout, erLockNowait:
		return true
	}
	return false
}

// noEffect wraps the error of a statement that cannot have granted or
// released anything (a read, a BEGIN, a cleanup): the operation surely had
// no effect, whatever happened to the statement.
func noEffect(what string, err error) error {
	if isReadOnlyErr(err) {
		return fmt.Errorf("%s: %w: %w", what, errReadOnly, err)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrRejected, err)
}

// sent maps the error of a statement that grants or releases: the server's
// own error means it did nothing (a statement is atomic); driver.ErrBadConn
// means the driver knows nothing was sent; anything else leaves the outcome
// unknown.
func sent(what string, err error) error {
	switch {
	case isReadOnlyErr(err):
		return fmt.Errorf("%s: %w: %w", what, errReadOnly, err)
	case mysqlErrno(err) != 0, errors.Is(err, driver.ErrBadConn):
		return fmt.Errorf("%s: %w: %w", what, ErrRejected, err)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrIndeterminate, err)
}

// createMissing runs the DDL of the tables (and sequences) that do not
// exist yet. It looks first: CREATE ... IF NOT EXISTS on an existing table
// waits for the metadata lock of every open transaction that used it, such
// as a holder's of mysql-for-update.
func createMissing(ctx context.Context, c *sql.Conn, ddl map[string]string) error {
	for name, stmt := range ddl {
		var n int
		if err := c.QueryRowContext(ctx,
			"SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=DATABASE() AND TABLE_NAME=?", name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// ensureRow inserts the lock row of a table keyed by name when it is
// missing. It reads first: INSERT IGNORE on an existing row would wait for
// a holder's row lock.
func ensureRow(ctx context.Context, c *sql.Conn, table, key string) error {
	var n int
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE name=?", key).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	_, err := c.ExecContext(ctx, "INSERT IGNORE INTO "+table+" (name) VALUES (?)", key)
	return err
}

// The fencing tokens of mysql-for-update and mysql-get-lock: a MariaDB
// SEQUENCE, drawn right after the lock is granted. NEXTVAL is not
// transactional, so a token drawn in a transaction that is rolled back
// (the holder's connection dropped) is never handed out again. Each lock
// name has its own sequence, as it has its own rows: a server that outlives
// one run (a campaign's pooled cluster) keeps every lock's state apart.
func fenceSequence(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("fence_tokens_%016x", h.Sum64())
}

// fenceDDL creates the fencing sequence of lock key.
func fenceDDL(key string) string { return "CREATE SEQUENCE IF NOT EXISTS " + fenceSequence(key) }

func nextToken(ctx context.Context, c *sql.Conn, key string) (int64, error) {
	var t int64
	err := c.QueryRowContext(ctx, "SELECT NEXTVAL("+fenceSequence(key)+")").Scan(&t)
	return t, err
}

// sessionToken takes the fencing token of a session lock just taken on c.
// When the server refuses it, the lock is given back at once (undo with
// args: ROLLBACK, RELEASE_LOCK) and the acquire is rejected; if that
// fails too, or the server never answered, the client holds a lock
// without a token: indeterminate.
func sessionToken(ctx context.Context, c *sql.Conn, key, undo string, args ...any) (*int64, error) {
	t, err := nextToken(ctx, c, key)
	if err == nil {
		return &t, nil
	}
	if mysqlErrno(err) != 0 {
		// The server answered: undo, which unlocks.
		if _, rerr := c.ExecContext(ctx, undo, args...); rerr == nil {
			return nil, fmt.Errorf("acquire: %w: fencing token: %w", ErrRejected, err)
		}
	}
	return nil, fmt.Errorf("acquire: %w: locked, but no fencing token: %w", ErrIndeterminate, err)
}

// sessionLock is the state of a scheme whose lock lives in a session: the
// pinned connection and the owner id of the lease taken on it.
type sessionLock struct {
	conn  *sql.Conn
	owner string
}

// take hands over the pinned connection for l, or says the client holds no
// such lock.
func (s *sessionLock) take(l Lease) (*sql.Conn, error) {
	if s.conn == nil || s.owner != l.Owner {
		return nil, fmt.Errorf("release: %w: this client holds no lock %q", ErrNotOwner, l.Owner)
	}
	c := s.conn
	s.conn, s.owner = nil, ""
	return c, nil
}

// drop throws the pinned connection away (Close of the lock): the server
// ends the session and whatever it held.
func (s *sessionLock) drop() {
	if s.conn != nil {
		discard(s.conn)
		s.conn = nil
	}
}

// sessionGone maps the error of a release on a pinned connection:
// driver.ErrBadConn means the connection was already dead before the
// release was sent (the server had closed it: wait_timeout, a crash), and
// the session, and the lock with it, had been gone for a while.
func sessionGone(what string, err error) error {
	if errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("%s: %w: the server had already closed the connection, and ended the session holding the lock: %w", what, ErrNotOwner, err)
	}
	return sent(what, err)
}
