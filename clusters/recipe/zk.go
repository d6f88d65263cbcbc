package recipe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/locktest/locktest/internal/sleep"
)

// ZKTick is the ensembles' tickTime: elections take about a second, and
// the session timeouts clients may ask for span 2 to 600 ticks (0.4 s to
// 120 s).
const ZKTick = 200 * time.Millisecond

// ZKPeer is one member of an ensemble as the others reach it.
type ZKPeer struct {
	IP                  string
	PeerPort, ElectPort int // quorum and leader-election ports
}

// ZKConfig is the zoo.cfg of one member: dataDir, where its client port
// listens, and every member's quorum addresses (server.N, 1-based).
func ZKConfig(dataDir string, clientPort int, clientAddr string, peers []ZKPeer) string {
	var servers strings.Builder
	for i, p := range peers {
		fmt.Fprintf(&servers, "server.%d=%s:%d:%d\n", i+1, p.IP, p.PeerPort, p.ElectPort)
	}
	return fmt.Sprintf(`tickTime=%d
initLimit=10
syncLimit=5
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
clientPort=%d
clientPortAddress=%s
4lw.commands.whitelist=*
admin.enableServer=false
forceSync=no
%s`, ZKTick.Milliseconds(), 2*ZKTick.Milliseconds(), 600*ZKTick.Milliseconds(), dataDir, clientPort, clientAddr, servers.String())
}

// ZKLog4j is a log4j.properties that writes to ${zookeeper.log.dir}/zookeeper.log.
const ZKLog4j = `log4j.rootLogger=INFO, ROLLINGFILE
log4j.appender.ROLLINGFILE=org.apache.log4j.RollingFileAppender
log4j.appender.ROLLINGFILE.File=${zookeeper.log.dir}/zookeeper.log
log4j.appender.ROLLINGFILE.MaxFileSize=10MB
log4j.appender.ROLLINGFILE.layout=org.apache.log4j.PatternLayout
log4j.appender.ROLLINGFILE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
`

// ZKLog4jConsole is a log4j.properties that writes to stderr (a container's
// log).
const ZKLog4jConsole = `log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Target=System.err
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
`

// ZKJVMFlags are the JVM options of a small, quick-starting member. The
// container check runs every 200 ms instead of every minute, so that an
// empty lock parent (a CONTAINER node, as Curator makes it) is reaped
// within a run.
var ZKJVMFlags = []string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.cnxTimeout=1000",
	"-Dznode.container.checkIntervalMs=200"}

// ZKMain is the server's main class.
const ZKMain = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// ZKFourLetter sends a four-letter command to the member at addr and
// returns its answer.
func ZKFourLetter(dial Dial, addr, cmd string) (string, error) {
	conn, err := dial(addr, 300*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var sb strings.Builder
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return sb.String(), nil
}

// ZKMode returns "leader", "follower" (or "standalone") once the member at
// addr serves requests, from `srvr`.
func ZKMode(dial Dial, name, addr string) (string, error) {
	out, err := ZKFourLetter(dial, addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("%s not serving: %q", name, strings.TrimSpace(out))
}

// ZKVersion returns "zookeeper 3.8.0" from the `srvr` answer of the member
// at addr.
func ZKVersion(dial Dial, addr string) string {
	out, err := ZKFourLetter(dial, addr, "srvr")
	if err == nil {
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
				v, _, _ = strings.Cut(v, "-")
				return "zookeeper " + strings.TrimSpace(v)
			}
		}
	}
	return "zookeeper (version unknown)"
}

// ZKMember is what ZKLeader asks of one member.
type ZKMember struct {
	Running bool
	Mode    func() (string, error) // ZKMode of the member
}

// ZKLeader returns the index of the one running member that says it leads,
// waiting (bounded by ctx) while an election is under way.
func ZKLeader(ctx context.Context, members func() []ZKMember) (int, error) {
	var last error
	for {
		leaders := []int{}
		for i, m := range members() {
			if !m.Running {
				continue
			}
			mode, err := m.Mode()
			if err != nil {
				last = err
				continue
			}
			if mode == "leader" {
				leaders = append(leaders, i)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], nil
		}
		if len(leaders) > 1 {
			last = fmt.Errorf("%d nodes say they lead", len(leaders))
		} else if last == nil {
			last = errors.New("no leader")
		}
		if !sleep.For(ctx, 100*time.Millisecond) {
			return -1, fmt.Errorf("zookeeper leader: %w (%w)", last, ctx.Err())
		}
	}
}
