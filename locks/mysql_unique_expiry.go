package locks

import (
	"context"
	"database/sql"
)

// mysqlUniqueExpiry is mysqlUnique with an expiry column: the "cleanup job"
// of the seeds, run by every acquirer before it inserts, deletes the lock's
// row once its expiry (server time) has passed. A holder that stalls longer
// than the TTL loses its row to the next acquirer while it still believes
// it holds the lock.
type mysqlUniqueExpiry struct {
	*mysqlBase
}

// The unique key is on the lock's name, for the reason given at
// mysqlUnique.
const uniqueExpiryTable = `CREATE TABLE IF NOT EXISTS unique_expiry_locks (
  id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name        VARCHAR(191) NOT NULL,
  owner       VARCHAR(64)  NOT NULL,
  acquired_at DATETIME(6)  NOT NULL,
  expires_at  DATETIME(6)  NOT NULL,
  UNIQUE KEY lock_name (name)
) ENGINE=InnoDB`

func newMySQLUniqueExpiry(c Config) (Lock, error) {
	b, err := newMySQLBase(c, func(ctx context.Context, conn *sql.Conn) error {
		return createMissing(ctx, conn, map[string]string{"unique_expiry_locks": uniqueExpiryTable})
	})
	if err != nil {
		return nil, err
	}
	return &mysqlUniqueExpiry{b}, nil
}

func (s *mysqlUniqueExpiry) Acquire(ctx context.Context) (Lease, error) {
	owner, start := newOwner(s.cfg), s.cfg.clock().Now()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var id int64
	_, err := s.attempt(ctx, false, func(c *sql.Conn) error {
		// The cleanup job: whatever becomes of it, it grants nothing.
		if _, err := c.ExecContext(ctx, "DELETE FROM unique_expiry_locks WHERE name=? AND expires_at < NOW(6)", s.cfg.Key); err != nil {
			return noEffect("acquire: delete expired", err)
		}
		var err error
		id, err = insertLockRow(ctx, c,
			"INSERT INTO unique_expiry_locks (name, owner, acquired_at, expires_at) VALUES (?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND)",
			s.cfg.Key, owner, s.cfg.TTL.Microseconds())
		return err
	})
	if err != nil {
		return Lease{}, err
	}
	var tok *int64
	if s.cfg.Fence {
		tok = &id
	}
	return s.lease(owner, start, tok, s.cfg.TTL), nil
}

func (s *mysqlUniqueExpiry) Release(ctx context.Context, l Lease) (ReleaseResult, error) {
	return deleteByOwner(ctx, s.mysqlBase, "unique_expiry_locks", l.Owner)
}
