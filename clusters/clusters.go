// Package clusters starts and stops the real servers a lock scheme runs
// against, in named topologies, and exposes to the nemeses what they need of
// each server: its address and the means to pause, kill and restart it.
// Backends live in subpackages (local: processes from Debian's packages).
package clusters

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/runstate"
)

// Node is one server process.
type Node interface {
	Name() string // e.g. "redis-1"
	Addr() string // host:port clients use
	PID() int     // 0 while it is down
	Pause() error // SIGSTOP: a frozen server
	Resume() error
	Kill() error                       // SIGKILL, no shutdown, state lost
	Restart(ctx context.Context) error // start again after Kill, same address, empty
}

// Cluster is a started topology.
type Cluster interface {
	Topology() string
	Nodes() []Node
	Addrs() []string    // what clients connect to, in order
	Versions() []string // server versions, for the run's record
	Stop(ctx context.Context) error
}

// Failoverer is a topology with a primary and replicas whose primary can
// fail over. The failover nemesis uses it.
type Failoverer interface {
	// FailPrimary makes the current primary fail (kill -9 or isolation) and
	// gets a replica promoted (by the topology's own machinery, such as
	// Sentinel, or by the harness acting as an operator tool would). It
	// returns once a new primary serves, with a line saying what happened.
	FailPrimary(ctx context.Context) (string, error)
	// Rejoin brings the failed primary back, as a replica of the new one
	// (or, after ErrNoPromotion, as the primary it was).
	Rejoin(ctx context.Context) error
}

// ErrNoPromotion is what FailPrimary returns (wrapped) when the primary
// failed but the topology's own machinery promoted no replica within its
// limit (Sentinel refuses a replica it judges stale, or a starved machine
// keeps its failover from finishing): a real server's behaviour, not a
// broken harness. The failover fault then ends without a promotion and
// Rejoin brings the old primary back as the primary.
var ErrNoPromotion = errors.New("the topology promoted no replica")

// LatePromoter is a Failoverer that can tell, after FailPrimary returned
// ErrNoPromotion, that the topology promoted a replica after all, past the
// limit (asked before Rejoin and after it): LatePromotion says so once,
// with a line naming the new primary, and the old primary then counts as
// failed again: the caller calls Rejoin (again) to make it the new
// primary's replica.
type LatePromoter interface {
	LatePromotion(ctx context.Context) (string, bool)
}

// Lagger is a Failoverer whose replica can be made to fall behind, and
// that says what each promotion lost (mysql-replicated). The failover
// fault holds the replica back just before the grant it strikes after, so
// that the grant is committed on the primary and received by the replica,
// but not applied when the replica is promoted: the replication lag of a
// replica whose applier has fallen behind, aimed at that one grant.
type Lagger interface {
	// HoldBackReplica lets the replica catch up with what the primary has
	// committed, then stops it applying what it receives (it goes on
	// receiving it); ResumeReplica lets it apply again. FailPrimary
	// promotes a held-back replica as it is.
	HoldBackReplica(ctx context.Context) error
	ResumeReplica(ctx context.Context) error
	// LostWrites reports whether the replica the last FailPrimary promoted
	// lacked writes the failed primary had committed before it failed.
	LostWrites() bool
}

// Isolator is a Failoverer that can also fail its primary by cutting it
// off the network instead of killing it (the failover fault's --param
// failover=isolate): the primary keeps running with its data, and Rejoin
// heals it, so that it comes back with that stale data until the
// topology demotes it.
type Isolator interface {
	IsolatePrimary(ctx context.Context) (string, error)
}

// Grouped is a topology whose servers play different parts (Sentinel's
// data nodes and Sentinels). The partition fault splits each group on its
// own, so that both sides of a split get members of every group; a
// topology that is not Grouped is one group.
type Grouped interface {
	// ServerGroups returns the nodes, each in exactly one group.
	ServerGroups() [][]Node
}

// Leader is a replicated topology with an elected leader (ZooKeeper,
// etcd). The kill and pause-server faults aim at it with --param
// kill=leader / pause-server=leader.
type Leader interface {
	// Leader returns the node that leads now, waiting (bounded) while an
	// election is under way.
	Leader(ctx context.Context) (Node, error)
}

// Primaried is a topology with one primary that every client's session
// lives on (MariaDB): a kill of the primary ends every session, a kill of a
// replica none.
type Primaried interface {
	Primary() Node
}

// Spec says what to start and where.
type Spec struct {
	Topology string            // e.g. "redis"
	Dir      string            // run directory: data and logs go below it
	Tracker  *runstate.Tracker // records started pids for `locktest cleanup`
	Params   map[string]string // server settings from the run (e.g. wait_timeout)
	// Net, when not nil, gives each server its own network namespace and
	// address (for partitions); nil runs servers on loopback.
	Net *netns.Net
	// ClockShim starts servers under a per-process wall-clock shim, so a
	// clock fault can shift one server's time (see ClockShifter).
	ClockShim bool
	// RunID labels what a backend creates outside the run directory
	// (containers, networks), so `locktest cleanup` can find it.
	RunID string
	// NetID, for a backend that brings its own network (Networked), asks
	// for partitions: it prefixes the names of the network namespaces the
	// backend makes. Empty: no partitions.
	NetID string
}

// Networked is a cluster that brings its own network layer (the docker
// backend: the containers' namespaces, and client namespaces on the Docker
// network's bridge); the harness uses its Net instead of Spec.Net.
type Networked interface {
	Net() *netns.Net // nil when the run asked for no partitions
}

// ClockShifter is a node whose wall clock can be shifted without touching
// the host clock.
type ClockShifter interface {
	// ShiftClock sets the node's wall clock to real time + offset, at once.
	// A node started without the clock shim returns ErrNoClockShim.
	ShiftClock(offset time.Duration) error
}

// ErrNoClockShim is what ShiftClock returns (wrapped) for a node that runs
// without the clock shim.
var ErrNoClockShim = errors.New("runs without the clock shim")

// Prober is a node, or a cluster, that can say whether it still serves as
// it did when it started, before another run uses it: a node's server
// process runs and is not stopped and answers its own protocol (a frozen
// server accepts connections but never answers); a cluster's servers still
// play their parts (Sentinel still names the first master).
type Prober interface {
	Probe(ctx context.Context) error
}

// ClockReader is a node that tells its wall clock as its server sees it
// (Redis TIME, MariaDB @@timestamp): a clock fault checks that its shift took
// effect, so a shim that is not in effect fails the run instead of
// leaving a fault that shifted nothing to pass for one that struck.
type ClockReader interface {
	ReadClock(ctx context.Context) (time.Time, error)
}

// CheckClockShim says why the clock shim cannot work here (its libraries
// are missing), nil when it can.
func CheckClockShim() error {
	for _, lib := range []string{FaketimeLib, MallocDebugLib} {
		if _, err := os.Stat(lib); err != nil {
			return fmt.Errorf("the clock shim needs %s: install it with `apt-get install -y libfaketime`", lib)
		}
	}
	return nil
}

// RedisTime sends TIME on a connection to a Redis server (its deadline
// set) and returns the server's wall clock.
func RedisTime(c net.Conn) (time.Time, error) {
	if _, err := c.Write([]byte("TIME\r\n")); err != nil {
		return time.Time{}, err
	}
	// *2 $n seconds $n microseconds
	r := bufio.NewReader(c)
	var lines []string
	for len(lines) < 5 {
		line, err := r.ReadString('\n')
		if err != nil {
			return time.Time{}, err
		}
		lines = append(lines, strings.TrimRight(line, "\r\n"))
	}
	sec, err1 := strconv.ParseInt(lines[2], 10, 64)
	usec, err2 := strconv.ParseInt(lines[4], 10, 64)
	if lines[0] != "*2" || err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("unexpected TIME reply %q", lines)
	}
	return time.Unix(sec, usec*1000), nil
}

// FaketimeLib and MallocDebugLib make the clock shim: libfaketime reads its
// offset from a file on every call, and glibc's debug malloc must come first
// or Debian's redis-server (jemalloc) hangs at start-up under libfaketime.
const (
	FaketimeLib    = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
	MallocDebugLib = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
)

// Hosted is a node that lives in its own network namespace.
type Hosted interface {
	Host() *netns.Host
}

// Backend starts clusters.
type Backend interface {
	Name() string
	Start(ctx context.Context, s Spec) (Cluster, error)
}

// Requirement is a program a topology needs and the package that has it.
type Requirement struct {
	Binary  string
	Package string
}

// Requirements lists, per topology, the programs the local backend runs.
var Requirements = map[string][]Requirement{
	"redis":          {{"redis-server", "redis-server"}},
	"redis5":         {{"redis-server", "redis-server"}},
	"redis-sentinel": {{"redis-server", "redis-server"}, {"redis-sentinel", "redis-sentinel"}},
	"mysql":          {{"mariadbd", "mariadb-server"}, {"mariadb-install-db", "mariadb-server"}},
	"mysql-replicated": {{"mariadbd", "mariadb-server"}, {"mariadb-install-db", "mariadb-server"},
		{"mariadb-dump", "mariadb-client"}, {"mariadb", "mariadb-client"}},
	"zk3":   {{"java", "zookeeper"}, {"/usr/share/java/zookeeper.jar", "zookeeper"}},
	"etcd3": {{"etcd", "etcd-server"}},
}

// SentinelMaster is the name under which Sentinel topologies monitor their
// master; clients ask Sentinel for the master by this name.
const SentinelMaster = "locktest"

// InstallHint is the command that installs every package locktest uses.
const InstallHint = "sudo ./scripts/install.sh   (or: apt-get update && apt-get install -y redis-server redis-sentinel redis-tools mariadb-server mariadb-client zookeeper etcd-server etcd-client iproute2 iptables)"

// Missing returns the requirements of topology that are not on PATH.
func Missing(topology string) []Requirement {
	var out []Requirement
	for _, r := range Requirements[topology] {
		if _, err := Find(r); err != nil {
			out = append(out, r)
		}
	}
	return out
}

// Find returns where requirement r is: a program on PATH, or a file given
// by its absolute path (a jar, which is not executable).
func Find(r Requirement) (string, error) {
	if strings.HasPrefix(r.Binary, "/") {
		_, err := os.Stat(r.Binary)
		return r.Binary, err
	}
	return exec.LookPath(r.Binary)
}

// Check says what topology needs that is not installed here, nil when
// nothing is missing.
func Check(topology string) error {
	if m := Missing(topology); len(m) > 0 {
		return MissingError(m)
	}
	return nil
}

// MissingError says which programs are missing and how to install them.
func MissingError(m []Requirement) error {
	var bins, pkgs []string
	for _, r := range m {
		bins = append(bins, r.Binary)
		pkgs = append(pkgs, r.Package)
	}
	return fmt.Errorf("%s not found: install it with `apt-get install -y %s` (or run scripts/install.sh)",
		strings.Join(bins, ", "), strings.Join(pkgs, " "))
}

// Each runs f on every node (of any backend's node type) at once and joins
// the errors, in the nodes' order: how the backends start, wait for and
// stop their servers, and how the pool checks them.
func Each[N any](nodes []N, f func(N) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
