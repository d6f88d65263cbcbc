package recipe

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/internal/params"
)

// The MySQL topologies run MariaDB: "mysql", one server, and
// "mysql-replicated", a primary and an asynchronous replica (row-based
// binlog, GTID) that the failover fault promotes.
const (
	// The account clients use (the worker passes it to the MySQL schemes
	// in locks.Config.Server).
	MySQLUser     = "locktest"
	MySQLPassword = "locktest"
	MySQLDatabase = "locktest"
	// The account the replica replicates with.
	MySQLReplUser     = "locktest_repl"
	MySQLReplPassword = "locktest-repl-secret"

	MySQLReadyLimit = 60 * time.Second // start-up, crash recovery included
	MySQLStopLimit  = 10 * time.Second // SIGTERM, then SIGKILL
	MySQLSyncLimit  = 15 * time.Second // replication threads running
)

// Param documents one --param setting.
type Param struct {
	Name, Default string
	For           string // the topologies or schemes that read it
	Summary       string
}

// Params lists the --param settings the topologies read, for `locktest
// list` and the README.
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
		"keep the servers' datadirs (binlogs included) in the run directory after the run (local backend)"},
}

// MySQLSettings are the --param settings of the MySQL topologies.
type MySQLSettings struct {
	WaitTimeout  int // wait_timeout, seconds
	LockWait     int // innodb_lock_wait_timeout, seconds
	ReplicaDelay int // MASTER_DELAY of the replica, seconds
	KeepData     bool
}

// MySQLSettingsFrom reads the settings from --param values.
func MySQLSettingsFrom(p map[string]string) (MySQLSettings, error) {
	s := MySQLSettings{WaitTimeout: 2, LockWait: 1}
	ints := []struct {
		name string
		v    *int
	}{
		{"wait_timeout", &s.WaitTimeout},
		{"innodb_lock_wait_timeout", &s.LockWait},
		{"replica_delay", &s.ReplicaDelay},
	}
	for _, f := range ints {
		n, ok, err := params.Seconds(p, f.name)
		if err != nil {
			return s, err
		}
		if ok {
			*f.v = n
		}
	}
	if v, ok := p["keep_datadir"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("--param keep_datadir=%s: want true or false", v)
		}
		s.KeepData = b
	}
	return s, nil
}

// CheckMySQLParams checks the values of every MySQL setting in p, so that a
// bad one is refused before anything starts.
func CheckMySQLParams(p map[string]string) error {
	if _, err := MySQLSettingsFrom(p); err != nil {
		return err
	}
	_, _, err := params.Seconds(p, "lock_wait")
	return err
}

// MySQLInstallFlags are mariadb-install-db's options besides --datadir,
// --tmpdir and --user.
var MySQLInstallFlags = []string{"--auth-root-authentication-method=socket", "--skip-test-db",
	"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M"}

// MariadbdFlags are mariadbd's options besides the paths (datadir, tmpdir,
// socket, pid file), the address and port, --user and --read-only.
func MariadbdFlags(s MySQLSettings, serverID int) []string {
	return []string{
		"--server-id=" + strconv.Itoa(serverID),
		"--log-bin=binlog", "--binlog-format=ROW", "--log-slave-updates",
		"--relay-log=relay", "--relay-log-recovery",
		"--skip-name-resolve", "--performance-schema=OFF", "--max-connections=1000",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M",
		"--innodb-buffer-pool-dump-at-shutdown=OFF", "--innodb-buffer-pool-load-at-startup=OFF",
		"--wait-timeout=" + strconv.Itoa(s.WaitTimeout),
		"--innodb-lock-wait-timeout=" + strconv.Itoa(s.LockWait),
		// Aborted connections (a client gone, an idle one dropped after
		// wait_timeout) are written to the log.
		"--log-warnings=3",
	}
}

// MySQLBootstrap creates the database and the two accounts, on this server
// only (not binlogged: both servers of mysql-replicated start with the same
// empty database and no GTID history).
func MySQLBootstrap() []string {
	return []string{
		"SET SESSION sql_log_bin=0",
		"CREATE DATABASE IF NOT EXISTS " + MySQLDatabase,
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", MySQLUser, MySQLPassword),
		fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", MySQLDatabase, MySQLUser),
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", MySQLReplUser, MySQLReplPassword),
		fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO '%s'@'%%'", MySQLReplUser),
	}
}

// MySQLReplicate makes a server a replica of host:port from GTID position
// pos ("" is the start of the primary's binlog), delay seconds behind.
func MySQLReplicate(host, port string, delay int, pos string) []string {
	return []string{"STOP SLAVE", "RESET SLAVE ALL", fmt.Sprintf("SET GLOBAL gtid_slave_pos='%s'", pos),
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_DELAY=%d",
			host, port, MySQLReplUser, MySQLReplPassword, delay),
		"START SLAVE"}
}

// MySQLPromote promotes a replica the way a hurried operator does, without
// waiting for it to apply what it received: RESET SLAVE ALL discards that
// relay log, and with it whatever the primary committed last.
var MySQLPromote = []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only=0"}

// MySQLDumpFlags are mariadb-dump's options for a consistent dump of the
// database with its GTID position, to rebuild a replica from.
var MySQLDumpFlags = []string{"--single-transaction", "--gtid", "--master-data=2", "--add-drop-database", "--skip-dump-date",
	"--databases", MySQLDatabase}

// DumpGTID finds the GTID position mariadb-dump --gtid --master-data=2
// writes as a comment, -- SET GLOBAL gtid_slave_pos='0-1-42'; it writes
// none when the server's binlog state is empty.
func DumpGTID(dump string) (string, bool) {
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

// GTIDOrNone says "GTID x" or "nothing".
func GTIDOrNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return "GTID " + s
}

// FirstWords shortens a statement for an error message, leaving out
// passwords.
func FirstWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}
