package locks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// mysqlForUpdate is the pessimistic lock of the seeds: BEGIN, then SELECT
// ... FOR UPDATE on the lock row, and the transaction stays open, on its
// connection, for the whole critical section; COMMIT releases. The row lock
// lives in the server's session: when the server closes an idle connection
// (wait_timeout) while the holder is paused, it rolls the transaction back
// and the lock is free for the next client, while the paused holder, once
// it runs again, still believes it holds it. The acquire is a try-lock
// (FOR UPDATE NOWAIT) unless --param lock_wait=N makes it wait in the
// server (FOR UPDATE WAIT N). With --fence the token is NEXTVAL of a sequence, drawn once the
// row is locked.
type mysqlForUpdate struct {
	*mysqlBase
	held sessionLock
}

const forUpdateTable = `CREATE TABLE IF NOT EXISTS for_update_locks (
  name VARCHAR(191) NOT NULL PRIMARY KEY
) ENGINE=InnoDB`

func newMySQLForUpdate(c Config) (Lock, error) {
	b, err := newMySQLBase(c, func(ctx context.Context, conn *sql.Conn) error {
		if err := createMissing(ctx, conn, map[string]string{"for_update_locks": forUpdateTable, fenceSequence(c.Key): fenceDDL(c.Key)}); err != nil {
			return err
		}
		return ensureRow(ctx, conn, "for_update_locks", c.Key)
	})
	if err != nil {
		return nil, err
	}
	return &mysqlForUpdate{mysqlBase: b}, nil
}

func (s *mysqlForUpdate) Acquire(ctx context.Context) (Lease, error) {
	if s.held.conn != nil {
		return Lease{}, fmt.Errorf("acquire: %w: this client already holds the lock", ErrRejected)
	}
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	wait := "NOWAIT"
	if s.lockWait > 0 {
		wait = fmt.Sprintf("WAIT %d", s.lockWait)
	}
	var tok *int64
	conn, err := s.attempt(ctx, true, func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
			return noEffect("acquire: begin", err)
		}
		var name string
		err := c.QueryRowContext(ctx, "SELECT name FROM for_update_locks WHERE name=? FOR UPDATE "+wait, s.cfg.Key).Scan(&name)
		switch {
		case err == nil:
		case isReadOnlyErr(err), isLockWait(err), errors.Is(err, sql.ErrNoRows):
			// Nothing is locked: end the transaction and keep the
			// connection if that works.
			if _, rerr := c.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				discard(c)
			}
			switch {
			case isReadOnlyErr(err):
				return fmt.Errorf("acquire: %w: %w", errReadOnly, err)
			case isLockWait(err):
				return fmt.Errorf("%w: %w", ErrHeld, err)
			}
			// Lost with a failover, say: put it back; this try fails.
			if ierr := ensureRow(ctx, c, "for_update_locks", s.cfg.Key); ierr != nil {
				return fmt.Errorf("acquire: %w: lock row missing: %w", ErrRejected, ierr)
			}
			return fmt.Errorf("acquire: %w: lock row missing", ErrRejected)
		default:
			return sent("acquire: select for update", err)
		}
		if s.cfg.Fence {
			tok, err = sessionToken(ctx, c, s.cfg.Key, "ROLLBACK")
		}
		return err
	})
	if err != nil {
		return Lease{}, err
	}
	s.held = sessionLock{conn: conn, owner: owner}
	return s.lease(owner, start, tok, 0), nil
}

// Release commits on the connection the lock was taken on. If the server
// had dropped that connection, the driver finds it dead before sending
// (ErrNotOwner: the lock went with the session); if the connection dies
// during the COMMIT, the outcome is unknown.
func (s *mysqlForUpdate) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	c, err := s.held.take(l)
	if err != nil {
		return ReleaseResult{Removed: "-"}, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		discard(c)
		if mysqlErrno(err) != 0 {
			// A COMMIT the server refused rolls back, which unlocks too.
			return ReleaseResult{}, fmt.Errorf("release: commit: %w: %w", ErrIndeterminate, err)
		}
		err = sessionGone("release: commit", err)
		if errors.Is(err, ErrNotOwner) {
			return ReleaseResult{Removed: "-"}, err
		}
		return ReleaseResult{}, err
	}
	_ = c.Close()
	return ReleaseResult{Removed: l.Owner}, nil
}

func (s *mysqlForUpdate) Close() error {
	s.held.drop()
	return s.mysqlBase.Close()
}
