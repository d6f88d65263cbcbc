package locks

import (
	"context"
	"database/sql"
	"fmt"
)

// mysqlUnique is the lock table of the seeds: a row per held lock, and a
// unique key that lets only one INSERT in. The seeds put the unique key on
// (owner, acquired-at), which would exclude nobody, since every acquire has
// its own owner id and time: the key that makes the table a lock is on the
// lock's name, and owner and acquired-at are plain columns. There is no
// expiry: a holder that crashes leaves its row, and the lock, forever. The
// row's AUTO_INCREMENT id, assigned by the very INSERT that grants the
// lock, is the fencing token.
type mysqlUnique struct {
	*mysqlBase
}

const uniqueTable = `CREATE TABLE IF NOT EXISTS unique_locks (
  id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name        VARCHAR(191) NOT NULL,
  owner       VARCHAR(64)  NOT NULL,
  acquired_at DATETIME(6)  NOT NULL,
  UNIQUE KEY lock_name (name)
) ENGINE=InnoDB`

func newMySQLUnique(c Config) (Lock, error) {
	b, err := newMySQLBase(c, func(ctx context.Context, conn *sql.Conn) error {
		return createMissing(ctx, conn, map[string]string{"unique_locks": uniqueTable})
	})
	if err != nil {
		return nil, err
	}
	return &mysqlUnique{b}, nil
}

func (s *mysqlUnique) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var id int64
	_, err := s.attempt(ctx, false, func(c *sql.Conn) error {
		var err error
		id, err = insertLockRow(ctx, c,
			"INSERT INTO unique_locks (name, owner, acquired_at) VALUES (?, ?, NOW(6))", s.cfg.Key, owner)
		return err
	})
	if err != nil {
		return Lease{}, err
	}
	var tok *int64
	if s.cfg.Fence {
		tok = &id
	}
	return s.lease(owner, start, tok, 0), nil
}

func (s *mysqlUnique) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	return deleteByOwner(ctx, s.mysqlBase, "unique_locks", l.Owner)
}

// insertLockRow runs the INSERT that grants a lock and returns the row's
// AUTO_INCREMENT id; a duplicate key is ErrHeld.
func insertLockRow(ctx context.Context, c *sql.Conn, insert string, args ...any) (int64, error) {
	res, err := c.ExecContext(ctx, insert, args...)
	if err != nil {
		if mysqlErrno(err) == erDupEntry || isLockWait(err) {
			return 0, fmt.Errorf("%w: %w", ErrHeld, err)
		}
		return 0, sent("acquire: insert", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("acquire: %w: no insert id: %w", ErrIndeterminate, err)
	}
	return id, nil
}

// deleteByOwner is the release of the lock tables: delete the lock's row if
// it is still ours.
func deleteByOwner(ctx context.Context, b *mysqlBase, table, owner string) (ReleaseResult, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	var n int64
	_, err := b.attempt(ctx, false, func(c *sql.Conn) error {
		res, err := c.ExecContext(ctx, "DELETE FROM "+table+" WHERE name=? AND owner=?", b.cfg.Key, owner)
		if err != nil {
			return sent("release", err)
		}
		n, err = res.RowsAffected()
		if err != nil {
			return fmt.Errorf("release: %w: %w", ErrIndeterminate, err)
		}
		return nil
	})
	switch {
	case err != nil:
		return ReleaseResult{}, err
	case n == 0:
		return ReleaseResult{Removed: "-"}, fmt.Errorf("release: %w: no row of ours", ErrNotOwner)
	}
	return ReleaseResult{Removed: owner}, nil
}
