package locks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// mysqlGetLock is MariaDB's named user lock: GET_LOCK(name, timeout) on a
// connection kept for the whole critical section, RELEASE_LOCK on the same
// connection. The lock belongs to the server's session: it goes when the
// connection goes (wait_timeout while the holder is paused, a crash), and
// the holder is not told. GET_LOCK works on a read-only server too, so the
// acquire asks for read_only in the same statement and moves on from a
// replica. The timeout is --param lock_wait (0 by default: a try-lock,
// GET_LOCK returns 0 when the lock is held). With --fence the
// token is NEXTVAL of a sequence, drawn once the lock is granted.
type mysqlGetLock struct {
	*mysqlBase
	held sessionLock
}

func newMySQLGetLock(c Config) (Lock, error) {
	b, err := newMySQLBase(c, func(ctx context.Context, conn *sql.Conn) error {
		return createMissing(ctx, conn, map[string]string{fenceSequence(c.Key): fenceDDL(c.Key)})
	})
	if err != nil {
		return nil, err
	}
	return &mysqlGetLock{mysqlBase: b}, nil
}

func (s *mysqlGetLock) Acquire(ctx context.Context) (Lease, error) {
	if s.held.conn != nil {
		return Lease{}, fmt.Errorf("acquire: %w: this client already holds the lock", ErrRejected)
	}
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var tok *int64
	conn, err := s.attempt(ctx, true, func(c *sql.Conn) error {
		var got sql.NullInt64
		err := c.QueryRowContext(ctx, "SELECT IF(@@global.read_only, -1, GET_LOCK(?, ?))", s.cfg.Key, s.lockWait).Scan(&got)
		switch {
		case err != nil:
			return sent("acquire: get_lock", err)
		case !got.Valid:
			return fmt.Errorf("acquire: %w: GET_LOCK returned NULL", ErrRejected)
		case got.Int64 == -1:
			return fmt.Errorf("acquire: %w", errReadOnly)
		case got.Int64 == 0:
			return ErrHeld
		}
		if s.cfg.Fence {
			tok, err = sessionToken(ctx, c, s.cfg.Key, "DO RELEASE_LOCK(?)", s.cfg.Key)
		}
		return err
	})
	if err != nil {
		return Lease{}, err
	}
	s.held = sessionLock{conn: conn, owner: owner}
	return s.lease(owner, start, tok, 0), nil
}

// Release runs RELEASE_LOCK on the connection the lock was taken on: 1 is
// released, 0 held by another session, NULL no such lock (both
// ErrNotOwner). A connection the server had dropped is found dead before
// anything is sent (ErrNotOwner: the lock went with the session).
func (s *mysqlGetLock) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	c, err := s.held.take(l)
	if err != nil {
		return ReleaseResult{Removed: "-"}, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", s.cfg.Key).Scan(&got); err != nil {
		discard(c)
		err = sessionGone("release", err)
		if errors.Is(err, ErrNotOwner) {
			return ReleaseResult{Removed: "-"}, err
		}
		return ReleaseResult{}, err
	}
	_ = c.Close()
	switch {
	case !got.Valid:
		return ReleaseResult{Removed: "-"}, fmt.Errorf("release: %w: the server knows no lock %q", ErrNotOwner, s.cfg.Key)
	case got.Int64 == 0:
		return ReleaseResult{Removed: "-"}, fmt.Errorf("release: %w: another session holds %q", ErrNotOwner, s.cfg.Key)
	}
	return ReleaseResult{Removed: l.Owner}, nil
}

func (s *mysqlGetLock) Close() error {
	s.held.drop()
	return s.mysqlBase.Close()
}
