package recipe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
// received but had not applied yet, which is then lost. Just before the
// kill it reads what p has committed (@@gtid_binlog_pos: every grant
// given so far is in it), and once r has stopped replicating, what r has
// applied (@@gtid_slave_pos): lost says whether r lacked any of it. The
// line says both. The backend then records the new roles.
func MySQLFailPrimary(ctx context.Context, p, r MySQLServer, how string) (line string, lost bool, err error) {
	if p.PID() == 0 {
		return "", false, fmt.Errorf("fail primary: %s is down", p.Name())
	}
	if r.PID() == 0 {
		return "", false, fmt.Errorf("fail primary: %s, the replica, is down: nothing to promote", r.Name())
	}
	committed, err := p.QueryString(ctx, "SELECT @@global.gtid_binlog_pos")
	if err != nil {
		return "", false, fmt.Errorf("fail primary: what %s committed: %w", p.Name(), err)
	}
	pid := p.PID()
	if err := p.Kill(); err != nil {
		return "", false, fmt.Errorf("fail primary: %w", err)
	}
	t0 := time.Now()
	// Stopped first, so that what it applied can be read before RESET
	// SLAVE ALL throws the rest away.
	if err := r.Exec(ctx, MySQLPromote[0]); err != nil {
		return "", false, fmt.Errorf("promote %s: %w", r.Name(), err)
	}
	st, err := r.ReplicaStatus(ctx)
	if err != nil {
		return "", false, fmt.Errorf("promote %s: %w", r.Name(), err)
	}
	applied, err := r.QueryString(ctx, "SELECT @@global.gtid_slave_pos")
	if err != nil {
		return "", false, fmt.Errorf("promote %s: %w", r.Name(), err)
	}
	if err := r.Exec(ctx, MySQLPromote[1:]...); err != nil {
		return "", false, fmt.Errorf("promote %s: %w", r.Name(), err)
	}
	return fmt.Sprintf("killed primary %s (pid %d, %s) with %s committed; promoted %s %s later (STOP SLAVE; RESET SLAVE ALL; read_only=0): it had received %s and applied %s",
			p.Name(), pid, how, GTIDOrNone(committed), r.Name(), time.Since(t0).Round(time.Millisecond), GTIDOrNone(st["Gtid_IO_Pos"]), GTIDOrNone(applied)),
		!GTIDCovers(applied, committed), nil
}

// MySQLHoldBack holds the replica r of primary p back: once r has applied
// everything p had committed when asked (MASTER_GTID_WAIT, at most
// holdBackWait: a write just before, such as the last release, is not
// lost with what comes next), it stops r's applier (its SQL thread) while
// its IO thread goes on receiving p's binlog. What r receives from then on
// waits in its relay log, unapplied, as on a replica whose applier has
// fallen behind, and a promotion (RESET SLAVE ALL) throws it away.
// MySQLResume lets it apply again.
func MySQLHoldBack(ctx context.Context, p, r MySQLServer) error {
	pos, err := p.QueryString(ctx, "SELECT @@global.gtid_binlog_pos")
	if err != nil {
		return fmt.Errorf("hold back %s: what %s committed: %w", r.Name(), p.Name(), err)
	}
	if pos != "" {
		// -1 after the wait: it lags more than that; held back anyway.
		if _, err := r.QueryString(ctx, fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', %g)", pos, holdBackWait.Seconds())); err != nil {
			return fmt.Errorf("hold back %s: catch up with %s: %w", r.Name(), GTIDOrNone(pos), err)
		}
	}
	if err := r.Exec(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		return fmt.Errorf("hold back %s: %w", r.Name(), err)
	}
	return nil
}

// holdBackWait bounds how long MySQLHoldBack waits for the replica to
// catch up first.
const holdBackWait = 2 * time.Second

// MySQLResume starts a held-back replica's applier again.
const MySQLResume = "START SLAVE SQL_THREAD"

// GTIDCovers reports whether GTID position have contains position want:
// in every replication domain of want, have reached at least want's
// sequence number (MariaDB numbers a domain's transactions in order,
// whichever server wrote them). Positions are lists like "0-1-42,1-2-7".
func GTIDCovers(have, want string) bool {
	got := gtidSeqs(have)
	for d, n := range gtidSeqs(want) {
		if got[d] < n {
			return false
		}
	}
	return true
}

// gtidSeqs reads a GTID position as domain -> sequence number.
func gtidSeqs(pos string) map[string]uint64 {
	out := map[string]uint64{}
	for _, g := range strings.Split(pos, ",") {
		parts := strings.Split(strings.TrimSpace(g), "-")
		if len(parts) != 3 {
			continue
		}
		n, err := strconv.ParseUint(parts[2], 10, 64)
		if err != nil {
			continue
		}
		out[parts[0]] = max(out[parts[0]], n)
	}
	return out
}
