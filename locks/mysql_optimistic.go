package locks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// mysqlOptimistic is the optimistic lock of the seeds: a lock row with a
// status and a version column. An acquire reads both and flips the status
// with a compare-and-set on the version, bumping it; the release sets the
// status back, again only if owner and version still match. The lease is
// the expiry column: a lock whose expiry (server time) has passed may be
// taken over by the next acquirer's compare-and-set, which is what keeps a
// crashed holder from blocking everybody forever. The version grows with
// every grant, so it is a fencing token as it stands.
type mysqlOptimistic struct {
	*mysqlBase
	versions map[string]int64 // owner -> version of the grant, until its release
}

const optimisticTable = `CREATE TABLE IF NOT EXISTS optimistic_locks (
  name       VARCHAR(191) NOT NULL PRIMARY KEY,
  status     TINYINT      NOT NULL DEFAULT 0,
  version    BIGINT       NOT NULL DEFAULT 0,
  owner      VARCHAR(64)  NOT NULL DEFAULT '',
  expires_at DATETIME(6)  NULL
) ENGINE=InnoDB`

func newMySQLOptimistic(c Config) (Lock, error) {
	b, err := newMySQLBase(c, func(ctx context.Context, conn *sql.Conn) error {
		if err := createMissing(ctx, conn, map[string]string{"optimistic_locks": optimisticTable}); err != nil {
			return err
		}
		return ensureRow(ctx, conn, "optimistic_locks", c.Key)
	})
	if err != nil {
		return nil, err
	}
	return &mysqlOptimistic{mysqlBase: b, versions: map[string]int64{}}, nil
}

func (s *mysqlOptimistic) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var version int64
	_, err := s.attempt(ctx, false, func(c *sql.Conn) error {
		var status, expired int
		err := c.QueryRowContext(ctx,
			"SELECT status, version, IFNULL(expires_at < NOW(6), 0) FROM optimistic_locks WHERE name=?",
			s.cfg.Key).Scan(&status, &version, &expired)
		if errors.Is(err, sql.ErrNoRows) {
			// Lost with a failover, say: put it back; this try fails.
			err = errors.New("lock row missing")
			if ierr := ensureRow(ctx, c, "optimistic_locks", s.cfg.Key); ierr != nil {
				err = fmt.Errorf("lock row missing: %w", ierr)
			}
		}
		if err != nil {
			return noEffect("acquire: read", err)
		}
		if status == 1 && expired == 0 {
			return ErrHeld
		}
		res, err := c.ExecContext(ctx,
			"UPDATE optimistic_locks SET status=1, version=version+1, owner=?, expires_at=NOW(6) + INTERVAL ? MICROSECOND WHERE name=? AND version=?",
			owner, s.cfg.TTL.Microseconds(), s.cfg.Key, version)
		if err != nil {
			return sent("acquire: update", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("%w: another client changed version %d first", ErrHeld, version)
		}
		version++
		return nil
	})
	if err != nil {
		return Lease{}, err
	}
	s.versions[owner] = version
	var tok *int64
	if s.cfg.Fence {
		tok = &version
	}
	return s.lease(owner, start, tok, s.cfg.TTL), nil
}

func (s *mysqlOptimistic) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	version, ok := s.versions[l.Owner]
	if !ok {
		return ReleaseResult{Removed: "-"}, fmt.Errorf("release: %w: this client holds no lock %q", ErrNotOwner, l.Owner)
	}
	delete(s.versions, l.Owner)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var removed bool
	_, err := s.attempt(ctx, false, func(c *sql.Conn) error {
		res, err := c.ExecContext(ctx,
			"UPDATE optimistic_locks SET status=0, owner='', expires_at=NULL WHERE name=? AND owner=? AND version=?",
			s.cfg.Key, l.Owner, version)
		if err != nil {
			return sent("release", err)
		}
		n, err := res.RowsAffected()
		removed = err == nil && n == 1
		return nil
	})
	switch {
	case err != nil:
		return ReleaseResult{}, err
	case !removed:
		return ReleaseResult{Removed: "-"}, fmt.Errorf("release: %w: version %d is no longer ours", ErrNotOwner, version)
	}
	return ReleaseResult{Removed: l.Owner}, nil
}
