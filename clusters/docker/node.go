package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/recipe"
)

// shimDir is where a node's directory (the clock offset file) is mounted
// inside its container.
const shimDir = "/locktest"

// Roles of nodes: what a container runs, which says how to ask it whether
// it serves.
const (
	roleRedis    = "redis"    // redis-server
	roleSentinel = "sentinel" // redis-server --sentinel
	roleZK       = "zk"       // a ZooKeeper member
	roleEtcd     = "etcd"     // an etcd member
	roleMySQL    = "mysql"    // mariadbd
)

// node is one server container. It keeps its address across kill and
// restart (a fixed IP on the run's network). A restart is a fresh process
// on the container's own filesystem: redis-server keeps no data (no RDB, no
// AOF) and comes back empty; ZooKeeper, etcd and MariaDB come back with
// their data directories, as the local backend's do.
type node struct {
	c     *cluster
	name  string
	role  string
	kind  string // image kind (KindRedis...)
	dir   string // on the host: logs, the clock offset file
	ip    string
	port  int
	host  *netns.Host // the container's namespace, nil without partitions
	shim  bool        // started under the clock shim
	clock string      // the shim's offset file on the host

	wave  int               // start order: wave 1 after wave 0 serves
	cmd   []string          // the container's command
	files map[string]string // absolute path in the container -> content, written before the first start
	mysql *mysqlAdmin       // the admin connection of a MariaDB node

	mu  sync.Mutex
	id  string // container id
	pid int    // the server's pid on the host, 0 while down
	img string // image of a compose container
}

var (
	_ clusters.Node         = (*node)(nil)
	_ clusters.Hosted       = (*node)(nil)
	_ clusters.ClockShifter = (*node)(nil)
)

func (n *node) Name() string { return n.name }
func (n *node) Addr() string { return net.JoinHostPort(n.ip, strconv.Itoa(n.port)) }

// Host returns the container's namespace as a host of the run's network, or
// nil when the run has no partitions.
func (n *node) Host() *netns.Host { return n.host }

func (n *node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

func (n *node) image() string {
	if n.img != "" {
		return n.img
	}
	return n.c.images[n.kind]
}

// KeepsData reports whether a restarted node comes back with its data (the
// kill fault says so): every server but redis-server.
func (n *node) KeepsData() bool { return n.role != roleRedis && n.role != roleSentinel }

// dial opens a TCP connection from the harness: the address is on a Docker
// bridge of this machine, routed to it locally.
func dial(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// logName is the file Stop saves the container's output to.
func (n *node) logName() string {
	switch n.role {
	case roleZK:
		return "zookeeper.log"
	case roleEtcd:
		return "etcd.log"
	case roleMySQL:
		return "mariadb.log"
	}
	return "redis.log"
}

func (n *node) containerName() string { return "locktest-" + n.c.runID + "-" + n.name }

// useClockShim writes the offset file the shim reads inside the container.
func (n *node) useClockShim() error {
	n.shim = true
	n.clock = filepath.Join(n.dir, "clock-offset")
	return os.WriteFile(n.clock, []byte("+0\n"), 0o644)
}

// ShiftClock sets the server's wall clock to real time + offset (the shim
// reads the bind-mounted file on every call).
func (n *node) ShiftClock(offset time.Duration) error {
	if !n.shim {
		return fmt.Errorf("%s %w", n.name, clusters.ErrNoClockShim)
	}
	tmp := n.clock + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%+.3f\n", offset.Seconds())), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.clock)
}

// ReadClock asks a Redis server (TIME) or MariaDB (@@timestamp) for its wall
// clock; the other servers run without the clock shim.
func (n *node) ReadClock(ctx context.Context) (time.Time, error) {
	switch {
	case n.role == roleMySQL && n.mysql != nil:
		us, err := n.mysql.queryString(ctx, "SELECT CAST(@@timestamp * 1000000 AS SIGNED)")
		if err != nil {
			return time.Time{}, err
		}
		v, err := strconv.ParseInt(us, 10, 64)
		return time.UnixMicro(v), err
	case n.role != roleRedis:
		return time.Time{}, fmt.Errorf("%s cannot tell its clock", n.name)
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", n.Addr())
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close()
	deadline, _ := dctx.Deadline()
	_ = c.SetDeadline(deadline)
	return clusters.RedisTime(c)
}

// create makes the container, on the run's network at its fixed address,
// and writes its files into it.
func (n *node) create(ctx context.Context) error {
	cfg := &container.Config{
		Image:  n.image(),
		Cmd:    n.cmd,
		Labels: map[string]string{LabelRun: n.c.runID, LabelTopology: n.c.topology, LabelNode: n.name},
	}
	hc := &container.HostConfig{}
	if n.shim {
		cfg.Env = []string{
			"LD_PRELOAD=" + clusters.MallocDebugLib + ":" + clusters.FaketimeLib,
			"FAKETIME_TIMESTAMP_FILE=" + shimDir + "/clock-offset",
			"FAKETIME_NO_CACHE=1",
			"FAKETIME_DONT_FAKE_MONOTONIC=1",
		}
		hc.Binds = []string{n.dir + ":" + shimDir}
		if _, err := os.Stat(clusters.FaketimeLib); err == nil {
			// An official image has no libfaketime: lend it the host's
			// (both are Debian's glibc; a locally built image has its own).
			hc.Binds = append(hc.Binds, clusters.FaketimeLib+":"+clusters.FaketimeLib+":ro")
		}
	}
	nc := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		n.c.netName: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: n.ip}},
	}}
	resp, err := n.c.cli.ContainerCreate(ctx, cfg, hc, nc, nil, n.containerName())
	if err != nil {
		return fmt.Errorf("create %s: %w", n.name, err)
	}
	n.mu.Lock()
	n.id = resp.ID
	n.mu.Unlock()
	return n.writeFiles(ctx, n.files)
}

// writeFiles writes files (absolute path -> content) into the container,
// running or not, with the directories they need.
func (n *node) writeFiles(ctx context.Context, files map[string]string) error {
	if len(files) == 0 {
		return nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	dirs := map[string]bool{}
	for _, p := range paths {
		for d := path.Dir(p); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var dl []string
	for d := range dirs {
		dl = append(dl, d)
	}
	sort.Strings(dl)
	now := time.Now()
	for _, d := range dl {
		if existingDirs[d] {
			continue // keep the image's own owner and mode
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: now}); err != nil {
			return err
		}
	}
	for _, p := range paths {
		body := files[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: 0o644, Size: int64(len(body)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := n.c.cli.CopyToContainer(ctx, n.id, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("write files into %s: %w", n.name, err)
	}
	return nil
}

// existingDirs are directories the images have already, with the owner
// their servers need (a file written into them keeps their mode).
var existingDirs = map[string]bool{"/data": true, "/etc": true, "/var": true, "/var/lib": true}

// startAndWait starts the container and waits until the server serves.
func (n *node) startAndWait(ctx context.Context) error {
	if err := n.c.cli.ContainerStart(ctx, n.id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	if err := n.refreshPID(ctx); err != nil {
		return err
	}
	return n.waitReady(ctx, n.readyLimit())
}

// readyLimit bounds a start: a JVM or a MariaDB datadir takes longer than
// a redis-server.
func (n *node) readyLimit() time.Duration {
	switch n.role {
	case roleZK, roleMySQL:
		return 90 * time.Second
	case roleEtcd:
		return 45 * time.Second
	}
	return 20 * time.Second
}

func (n *node) refreshPID(ctx context.Context) error {
	info, err := n.c.cli.ContainerInspect(ctx, n.id)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", n.name, err)
	}
	pid := 0
	if info.State != nil && info.State.Running {
		pid = info.State.Pid
	}
	n.mu.Lock()
	n.pid = pid
	n.mu.Unlock()
	return nil
}

// ready says whether the server serves: PING for Redis and Sentinel, srvr
// for ZooKeeper (a member serves once it has a leader), /health for etcd
// (likewise), a ping of the admin account for MariaDB.
func (n *node) ready(ctx context.Context) error {
	switch n.role {
	case roleZK:
		_, err := recipe.ZKMode(dial, n.name, n.Addr())
		return err
	case roleEtcd:
		return recipe.EtcdHealthy(recipe.EtcdHTTP(dial), n.name, n.Addr())
	case roleMySQL:
		return n.mysql.ping(ctx)
	}
	return ping(n.Addr())
}

// waitReady polls ready over the bridge every 20 ms (50 ms for the
// ensembles).
func (n *node) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	every := 20 * time.Millisecond
	if n.role == roleZK || n.role == roleEtcd || n.role == roleMySQL {
		every = 50 * time.Millisecond
	}
	var last error
	for {
		if last = n.ready(ctx); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (%s) did not serve within %s: %v; last log lines: %s", n.name, n.Addr(), limit, last, n.tail(ctx, 3))
		}
		info, err := n.c.cli.ContainerInspect(ctx, n.id)
		if err == nil && info.State != nil && !info.State.Running && !info.State.Paused {
			return fmt.Errorf("%s exited at start (code %d): %s", n.name, info.State.ExitCode, n.tail(ctx, 3))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// ping sends an inline PING and waits for +PONG. From the root namespace:
// the address is on a Docker bridge of this machine, routed to it locally.
func ping(addr string) error {
	return recipe.RedisPing(func(addr string, timeout time.Duration) (net.Conn, error) {
		return net.DialTimeout("tcp", addr, timeout)
	}, addr)
}

// Pause freezes every process of the container (the cgroup freezer).
func (n *node) Pause() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	// The cgroup freezer gives up when a task does not freeze in time
	// ("unable to freeze", seen on a loaded 2-core machine) and thaws
	// the cgroup again: a second try usually succeeds.
	for try := 0; try < 3; try++ {
		if err = n.c.cli.ContainerPause(ctx, n.id); err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("pause %s: %w", n.name, err)
	}
	return nil
}

// PauseHow says, for the history, how a container is frozen and thawed.
func (n *node) PauseHow() (pause, resume string) { return "docker pause", "docker unpause" }

// Resume thaws a paused container.
func (n *node) Resume() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.c.cli.ContainerUnpause(ctx, n.id); err != nil {
		// Killed (and maybe restarted) while paused: nothing is frozen
		// any more, as after SIGCONT to a new process.
		if info, ierr := n.c.cli.ContainerInspect(ctx, n.id); ierr == nil && info.State != nil && !info.State.Paused {
			return nil
		}
		return fmt.Errorf("resume %s: %w", n.name, err)
	}
	return nil
}

// Kill sends SIGKILL to the container and waits until it has stopped.
func (n *node) Kill() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if n.PID() == 0 {
		return fmt.Errorf("%s is not running", n.name)
	}
	wait, werr := n.c.cli.ContainerWait(ctx, n.id, container.WaitConditionNotRunning)
	if err := n.c.cli.ContainerKill(ctx, n.id, "KILL"); err != nil {
		return fmt.Errorf("kill %s: %w", n.name, err)
	}
	select {
	case <-wait:
	case err := <-werr:
		return fmt.Errorf("kill %s: %w", n.name, err)
	}
	n.mu.Lock()
	n.pid = 0
	n.mu.Unlock()
	return nil
}

// Restart starts the killed container again at the same address (and,
// with partitions, its new namespace named again with the blocks in force
// written into it): a fresh, empty redis-server; a ZooKeeper, etcd or
// MariaDB server on the data it had.
func (n *node) Restart(ctx context.Context) error {
	if n.PID() != 0 {
		return fmt.Errorf("%s is still running", n.name)
	}
	if err := n.keepAddress(ctx); err != nil {
		return err
	}
	if err := n.c.cli.ContainerStart(ctx, n.id, container.StartOptions{}); err != nil {
		return fmt.Errorf("restart %s: %w", n.name, err)
	}
	if err := n.refreshPID(ctx); err != nil {
		return err
	}
	if err := n.checkAddress(ctx); err != nil {
		return err
	}
	if n.host != nil && n.c.net != nil {
		if err := n.c.net.Reattach(ctx, n.host, n.PID()); err != nil {
			return err
		}
	}
	return n.waitReady(ctx, n.readyLimit())
}

// keepAddress makes the stopped container ask for its address (n.ip, which
// the clients use) when it starts again. A container of the run's own
// network, or of a stack that gives every service an ipv4_address (the
// repository's docker-compose.yml), asks for it already. Another (a stack
// whose network hands out addresses as containers start) is reconnected to
// its network with that address, its aliases kept; the engine accepts a
// chosen address only on a network with a subnet of the user's, and where
// it refuses the container is reconnected as it was: checkAddress then
// tells, after the start, whether it moved.
func (n *node) keepAddress(ctx context.Context) error {
	info, err := n.c.cli.ContainerInspect(ctx, n.id)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", n.name, err)
	}
	var es *network.EndpointSettings
	if info.NetworkSettings != nil {
		es = info.NetworkSettings.Networks[n.c.netName]
	}
	if es == nil {
		return fmt.Errorf("%s is no longer on network %s", n.name, n.c.netName)
	}
	if es.IPAMConfig != nil && es.IPAMConfig.IPv4Address == n.ip {
		return nil
	}
	var aliases []string
	for _, a := range es.Aliases {
		if len(info.ID) < 12 || a != info.ID[:12] { // the engine adds the short id itself
			aliases = append(aliases, a)
		}
	}
	if err := n.c.cli.NetworkDisconnect(ctx, n.c.netName, n.id, false); err != nil {
		return fmt.Errorf("%s: disconnect from %s to keep its address: %w", n.name, n.c.netName, err)
	}
	pinned := &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: n.ip}, Aliases: aliases, Links: es.Links}
	if err := n.c.cli.NetworkConnect(ctx, n.c.netName, n.id, pinned); err == nil {
		return nil
	}
	if err := n.c.cli.NetworkConnect(ctx, n.c.netName, n.id, &network.EndpointSettings{Aliases: aliases, Links: es.Links}); err != nil {
		return fmt.Errorf("%s: reconnect to %s: %w", n.name, n.c.netName, err)
	}
	return nil
}

// checkAddress says, after a restart, whether the container came back at
// another address than the one its clients use: the run cannot go on. The
// first server of the cluster that moved says why; any other is left to
// the error that already stops the run (one line, not one per server).
func (n *node) checkAddress(ctx context.Context) error {
	info, err := n.c.cli.ContainerInspect(ctx, n.id)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", n.name, err)
	}
	var now string
	if info.NetworkSettings != nil {
		if es := info.NetworkSettings.Networks[n.c.netName]; es != nil {
			now = es.IPAddress
		}
	}
	if now == n.ip {
		return nil
	}
	if !n.c.moved.CompareAndSwap(false, true) {
		return nil
	}
	return fmt.Errorf("%s came back at %s instead of %s, where its clients look for it: network %s hands out addresses as containers start (it has no subnet of its own); give it a subnet and every service an ipv4_address, as the repository's docker-compose.yml does", n.name, now, n.ip, n.c.netName)
}

// heal leaves a compose container running and thawed.
func (n *node) heal(ctx context.Context) error {
	info, err := n.c.cli.ContainerInspect(ctx, n.id)
	if err != nil {
		return err
	}
	switch {
	case info.State.Paused:
		return n.c.cli.ContainerUnpause(ctx, n.id)
	case !info.State.Running:
		return n.c.cli.ContainerStart(ctx, n.id, container.StartOptions{})
	}
	return nil
}

// saveLog writes the container's output to the node's directory
// (redis.log, zookeeper.log, etcd.log or mariadb.log).
func (n *node) saveLog(ctx context.Context) {
	rc, err := n.c.cli.ContainerLogs(ctx, n.id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return
	}
	defer rc.Close()
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return
	}
	f, err := os.Create(filepath.Join(n.dir, n.logName()))
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = demux(f, f, rc)
}

// tail returns the container's last log lines, for errors.
func (n *node) tail(ctx context.Context, lines int) string {
	rc, err := n.c.cli.ContainerLogs(ctx, n.id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(lines)})
	if err != nil {
		return "(no log)"
	}
	defer rc.Close()
	var b strings.Builder
	if _, err := demux(&b, &b, rc); err != nil && !errors.Is(err, context.Canceled) && b.Len() == 0 {
		return "(no log)"
	}
	return strings.ReplaceAll(strings.TrimSpace(b.String()), "\n", " | ")
}

// isNotFound reports a missing container or network.
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// exec runs argv inside the running container and returns its standard
// output; a non-zero exit is an error carrying its standard error.
func (n *node) exec(ctx context.Context, argv []string) (string, error) {
	resp, err := n.c.cli.ContainerExecCreate(ctx, n.id, container.ExecOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", fmt.Errorf("exec in %s: %w", n.name, err)
	}
	att, err := n.c.cli.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", fmt.Errorf("exec in %s: %w", n.name, err)
	}
	defer att.Close()
	var out, errOut strings.Builder
	if _, err := demux(&out, &errOut, att.Reader); err != nil {
		return "", fmt.Errorf("exec in %s: %w", n.name, err)
	}
	ins, err := n.c.cli.ContainerExecInspect(ctx, resp.ID)
	if err != nil {
		return "", fmt.Errorf("exec in %s: %w", n.name, err)
	}
	if ins.ExitCode != 0 {
		return out.String(), fmt.Errorf("%s in %s exited with %d: %s", argv[0], n.name, ins.ExitCode, firstLine(strings.TrimSpace(errOut.String())))
	}
	return out.String(), nil
}
