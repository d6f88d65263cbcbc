package recipe

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/internal/sleep"
)

// MySQLServer is one MariaDB server as the replication and failover steps
// see it, whatever runs it: the backend administers it (over its socket,
// over TCP) and kills it.
type MySQLServer interface {
	Name() string
	PID() int // 0 while it is down
	Kill() error
	// Exec runs statements in order on one administrator session.
	Exec(ctx context.Context, stmts ...string) error
	QueryString(ctx context.Context, q string) (string, error)
	// ReplicaStatus is SHOW SLAVE STATUS as column -> value (empty when
	// the server replicates from nobody).
	ReplicaStatus(ctx context.Context) (map[string]string, error)
}

// MySQLReplicateFrom makes n a replica of the primary at host:port from
// GTID position pos ("" is the start of its binlog), delay seconds behind,
// and waits until both replication threads run. It returns SHOW SLAVE
// STATUS then.
func MySQLReplicateFrom(ctx context.Context, n MySQLServer, primary, host, port string, delay int, pos string) (map[string]string, error) {
	if err := n.Exec(ctx, MySQLReplicate(host, port, delay, pos)...); err != nil {
		return nil, fmt.Errorf("replicate %s from %s: %w", n.Name(), primary, err)
	}
	deadline := time.Now().Add(MySQLSyncLimit)
	for {
		st, err := n.ReplicaStatus(ctx)
		if err != nil {
			return nil, err
		}
		if st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
			return st, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("replicate %s from %s: threads not running after %s (io %q %s, sql %q %s)", n.Name(), primary, MySQLSyncLimit,
				st["Slave_IO_Running"], st["Last_IO_Error"], st["Slave_SQL_Running"], st["Last_SQL_Error"])
		}
		if !sleep.For(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

// MySQLFailPrimary kills the primary p (how says with what, e.g. "kill
// -9") and promotes the replica r the way a hurried operator does
// (MySQLPromote): it does not wait for the replica to apply what it
// received but had not applied yet, which is then lost. The line says what
// the replica had received and applied when it was promoted. The backend
// then records the new roles.
func MySQLFailPrimary(ctx context.Context, p, r MySQLServer, how string) (string, error) {
	if p.PID() == 0 {
		return "", fmt.Errorf("fail primary: %s is down", p.Name())
	}
	if r.PID() == 0 {
		return "", fmt.Errorf("fail primary: %s, the replica, is down: nothing to promote", r.Name())
	}
	pid := p.PID()
	if err := p.Kill(); err != nil {
		return "", fmt.Errorf("fail primary: %w", err)
	}
	t0 := time.Now()
	st, err := r.ReplicaStatus(ctx)
	if err != nil {
		return "", fmt.Errorf("promote %s: %w", r.Name(), err)
	}
	applied, err := r.QueryString(ctx, "SELECT @@global.gtid_slave_pos")
	if err != nil {
		return "", fmt.Errorf("promote %s: %w", r.Name(), err)
	}
	if err := r.Exec(ctx, MySQLPromote...); err != nil {
		return "", fmt.Errorf("promote %s: %w", r.Name(), err)
	}
	return fmt.Sprintf("killed primary %s (pid %d, %s); promoted %s %s later (STOP SLAVE; RESET SLAVE ALL; read_only=0): it had received %s and applied %s; anything later is lost",
		p.Name(), pid, how, r.Name(), time.Since(t0).Round(time.Millisecond), GTIDOrNone(st["Gtid_IO_Pos"]), GTIDOrNone(applied)), nil
}
