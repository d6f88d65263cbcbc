// Package local is the embedded backend: it runs the servers as child
// processes from the machine's Debian packages, on loopback addresses and
// ports it picks itself, with their data and logs in the run directory.
package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/recipe"
)

// Backend starts topologies as local processes.
type Backend struct{}

// Name returns "local".
func (Backend) Name() string { return string(clusters.Local) }

// Start starts the topology in s.
func (Backend) Start(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	// Servers change their working directory (redis-server --dir), so
	// every path handed to them, the clock shim's offset file among them,
	// must be absolute: with a relative store the shim found no file and
	// a clock fault shifted nothing.
	if s.Dir != "" {
		abs, err := filepath.Abs(s.Dir)
		if err != nil {
			return nil, err
		}
		s.Dir = abs
	}
	for _, t := range Topologies {
		if t.Name == s.Topology {
			if m := clusters.Missing(s.Topology); len(m) > 0 {
				return nil, clusters.MissingError(m)
			}
			return t.Start(ctx, s)
		}
	}
	return nil, fmt.Errorf("local backend: unknown topology %q", s.Topology)
}

// Topology is one shape of servers the local backend can start; what it
// can do (fail over, run under the clock shim, isolate its primary) is
// declared once, in clusters.Topologies.
type Topology struct {
	Name  string
	Start func(ctx context.Context, s clusters.Spec) (clusters.Cluster, error)
}

// Topologies is the registry of the local backend's topologies.
var Topologies = []Topology{
	{Name: "redis", Start: startRedisSingle},
	{Name: "redis5", Start: func(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
		return startRedisMasters(ctx, s, 5)
	}},
	{Name: "redis-sentinel", Start: startRedisSentinel},
	{Name: "mysql", Start: startMySQL},
	{Name: "mysql-replicated", Start: startMySQLReplicated},
	{Name: "zk3", Start: portRaceRetry(startZK)},
	{Name: "etcd3", Start: portRaceRetry(startEtcd)},
}

// FailsOver reports whether topology can fail over
// (clusters.TopologyInfo.FailsOver).
func FailsOver(topology string) bool {
	t, _ := clusters.LookupTopology(topology)
	return t.FailsOver
}

func startRedisSingle(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	return startRedisMasters(ctx, s, 1)
}

// startRedisMasters starts count independent redis-servers in parallel.
func startRedisMasters(ctx context.Context, s clusters.Spec, count int) (clusters.Cluster, error) {
	c := &cluster{servers[*redisNode]{topology: s.Topology, version: redisVersion}}
	for i := 1; i <= count; i++ {
		n := &redisNode{procNode: procNode{name: fmt.Sprintf("redis-%d", i), dir: filepath.Join(s.Dir, "servers", fmt.Sprintf("redis-%d", i)), tracker: s.Tracker}}
		if s.ClockShim {
			if err := n.useClockShim(); err != nil {
				return nil, err
			}
		}
		if s.Net != nil {
			h, err := s.Net.AddHost(n.name)
			if err != nil {
				return nil, err
			}
			n.host = h
		}
		c.nodes = append(c.nodes, n)
	}
	if err := clusters.Each(c.nodes, func(n *redisNode) error { return n.start(ctx, 0) }); err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return c, nil
}

// cluster is a started topology of redis-servers.
type cluster struct {
	servers[*redisNode]
}

// redisNode is one redis-server with no persistence.
// It launches itself (procNode.env holds the clock shim's environment);
// procNode handles the process.
type redisNode struct {
	procNode
	clockFile string // the shim's offset file, "" without the shim
	bin       string // the program, "redis-server" when empty
	conf      string // a config file given before the options, "" for none
	nsPort    int    // its port inside its namespace, 6379 when 0
}

// useClockShim makes the node start under libfaketime with an offset file.
func (n *redisNode) useClockShim() error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	n.clockFile = filepath.Join(n.dir, "clock-offset")
	if err := os.WriteFile(n.clockFile, []byte("+0\n"), 0o644); err != nil {
		return err
	}
	n.env = shimEnv(n.clockFile)
	return nil
}

// ShiftClock sets the server's wall clock to real time + offset.
func (n *redisNode) ShiftClock(offset time.Duration) error {
	if n.clockFile == "" {
		return fmt.Errorf("%s %w", n.name, clusters.ErrNoClockShim)
	}
	return writeClockOffset(n.clockFile, offset)
}

func (n *redisNode) ip() string {
	if n.host != nil {
		return n.host.IP
	}
	return "127.0.0.1"
}

// start runs redis-server on port (0: pick a free one), and waits until it
// answers PING.
func (n *redisNode) start(ctx context.Context, port int) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		p := port
		if p == 0 && n.host != nil {
			p = 6379 // the namespace is the node's own
			if n.nsPort != 0 {
				p = n.nsPort
			}
		} else if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return err
			}
		}
		if err := n.launch(ctx, p); err != nil {
			lastErr = err
			if port != 0 {
				// The same port is needed (restart): wait for it to free.
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		return nil
	}
	return fmt.Errorf("start %s: %w", n.name, lastErr)
}

func (n *redisNode) launch(ctx context.Context, port int) error {
	addr := net.JoinHostPort(n.ip(), strconv.Itoa(port))
	bin := n.bin
	if bin == "" {
		bin = "redis-server"
	}
	argv := []string{bin}
	if n.conf != "" {
		argv = append(argv, n.conf)
	}
	argv = append(argv,
		"--bind", n.ip(), "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", n.dir,
		"--daemonize", "no", "--protected-mode", "no", "--loglevel", "notice")
	if n.host != nil {
		argv = n.host.Command(argv...)
	}
	logPath := filepath.Join(n.dir, "redis.log")
	sp := spawn{argv: argv, env: n.env, log: logPath, clockFile: n.clockFile, started: func() { n.addr = addr }}
	cmd, exited, err := n.spawn(sp)
	if err != nil {
		return err
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := n.ping(addr); err == nil {
			return nil
		}
		select {
		case <-exited:
			n.tracker.RemoveProc(cmd.Process.Pid)
			return fmt.Errorf("redis-server exited at start: %s", lastLines(logPath, 3))
		case <-ctx.Done():
			n.kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.kill()
			return fmt.Errorf("redis-server on %s did not answer PING within 10s: %s", addr, lastLines(logPath, 3))
		}
	}
}

// dial connects to the server from its own namespace (if any).
func (n *redisNode) dial(addr string) (net.Conn, error) {
	if n.host != nil {
		return n.host.Dial(addr, 200*time.Millisecond)
	}
	return net.DialTimeout("tcp", addr, 200*time.Millisecond)
}

// ReadClock asks the server for its wall clock (TIME).
func (n *redisNode) ReadClock(ctx context.Context) (time.Time, error) {
	n.mu.Lock()
	addr := n.addr
	n.mu.Unlock()
	c, err := n.dial(addr)
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close()
	deadline := time.Now().Add(500 * time.Millisecond)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	return clusters.RedisTime(c)
}

// ping sends an inline PING and waits for +PONG, from inside the node's
// namespace when it has one.
func (n *redisNode) ping(addr string) error { return recipe.RedisPing(hostDial(n.host), addr) }

// Probe says whether the server runs and answers PING (clusters.Prober).
func (n *redisNode) Probe(context.Context) error {
	return probe(n.name, n.PID(), func() error { return n.ping(n.Addr()) })
}

// Restart starts the server again on its old port, with no data.
func (n *redisNode) Restart(ctx context.Context) error {
	if n.PID() != 0 {
		return fmt.Errorf("%s is still running", n.name)
	}
	_, portStr, _ := net.SplitHostPort(n.Addr())
	port, _ := strconv.Atoi(portStr)
	return n.start(ctx, port)
}

// faketimeShm are the shared-memory files libfaketime makes for process
// pid (and leaves behind, even on a clean shutdown).
func faketimeShm(pid int) []string {
	return []string{fmt.Sprintf("/dev/shm/faketime_shm_%d", pid), fmt.Sprintf("/dev/shm/sem.faketime_sem_%d", pid)}
}

func removeFaketimeShm(pid int) {
	for _, p := range faketimeShm(pid) {
		_ = os.Remove(p)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

var (
	versionOnce sync.Once
	version     string
)

func redisVersion() string {
	versionOnce.Do(func() {
		out, err := exec.Command("redis-server", "--version").Output()
		if err != nil {
			version = "redis-server (version unknown)"
			return
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "v=") {
				version = "redis " + strings.TrimPrefix(f, "v=")
				return
			}
		}
		version = strings.TrimSpace(string(out))
	})
	return version
}
