package recipe

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestZKConfig(t *testing.T) {
	cfg := ZKConfig("/data", 2181, "0.0.0.0", []ZKPeer{{"10.0.0.1", 2888, 3888}, {"10.0.0.2", 2888, 3888}})
	for _, want := range []string{"tickTime=200\n", "minSessionTimeout=400\n", "maxSessionTimeout=120000\n", "dataDir=/data\n",
		"clientPort=2181\n", "clientPortAddress=0.0.0.0\n", "4lw.commands.whitelist=*\n",
		"server.1=10.0.0.1:2888:3888\n", "server.2=10.0.0.2:2888:3888\n"} {
		require.Contains(t, cfg, want)
	}
}

func TestRedisConfs(t *testing.T) {
	master, err := RedisDataConf("")
	require.NoError(t, err)
	require.NotContains(t, master, "replicaof")
	require.Contains(t, master, "user "+ReplUser+" on >"+ReplPass)
	replica, err := RedisDataConf("10.0.0.1:6379")
	require.NoError(t, err)
	require.Contains(t, replica, "replicaof 10.0.0.1 6379\n")
	s, err := SentinelConf("10.0.0.1:6379")
	require.NoError(t, err)
	require.Contains(t, s, "sentinel monitor locktest 10.0.0.1 6379 2\n")
	require.Contains(t, s, "sentinel down-after-milliseconds locktest 1000\n")
	_, err = SentinelConf("no-port")
	require.Error(t, err)
	require.Equal(t, "replica-announce-ip 198.18.0.3\n", ReplicaAnnounce("198.18.0.3"))
	require.Equal(t, "sentinel announce-ip 198.18.0.5\nsentinel announce-port 26379\n", SentinelAnnounce("198.18.0.5", 26379))
	require.Empty(t, ReplicaAnnounce("")+SentinelAnnounce("", 26379))
}

func TestMySQLSettings(t *testing.T) {
	s, err := MySQLSettingsFrom(nil)
	require.NoError(t, err)
	require.Equal(t, MySQLSettings{WaitTimeout: 2, LockWait: 1}, s)
	s, err = MySQLSettingsFrom(map[string]string{"wait_timeout": "5", "replica_delay": "1", "keep_datadir": "true"})
	require.NoError(t, err)
	require.Equal(t, MySQLSettings{WaitTimeout: 5, LockWait: 1, ReplicaDelay: 1, KeepData: true}, s)
	_, err = MySQLSettingsFrom(map[string]string{"wait_timeout": "0"})
	require.ErrorContains(t, err, "want a whole number of seconds from 1 to 31536000")
	flags := strings.Join(MariadbdFlags(s, 2), " ")
	require.Contains(t, flags, "--server-id=2")
	require.Contains(t, flags, "--wait-timeout=5")
	stmts := strings.Join(MySQLReplicate("10.0.0.1", "3306", 1, "0-1-5"), "; ")
	require.Contains(t, stmts, "SET GLOBAL gtid_slave_pos='0-1-5'")
	require.Contains(t, stmts, "MASTER_HOST='10.0.0.1', MASTER_PORT=3306")
	require.Contains(t, stmts, "MASTER_DELAY=1")
	pos, ok := DumpGTID("-- SET GLOBAL gtid_slave_pos='0-2-17';\n")
	require.True(t, ok)
	require.Equal(t, "0-2-17", pos)
}

// What a promoted replica applied covers what the primary committed when
// every domain of the one reached the other's sequence number, whichever
// server wrote it.
func TestGTIDCovers(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		covers     bool
	}{
		{"0-1-6", "0-1-6", true},
		{"0-1-5", "0-1-6", false},
		{"0-2-31", "0-2-30", true},
		{"0-1-30", "0-2-30", true}, // the same domain, written by the other server
		{"", "", true},             // nothing committed: nothing to lose
		{"", "0-1-1", false},
		{"0-1-9,1-2-3", "0-1-9,1-2-4", false},
		{"0-1-9, 1-2-4", "1-2-4,0-1-9", true},
	} {
		require.Equal(t, tc.covers, GTIDCovers(tc.have, tc.want), "%q covers %q", tc.have, tc.want)
	}
}
