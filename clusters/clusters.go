// Package clusters starts and stops the real servers a lock scheme runs
// against, in named topologies, and exposes to the nemeses what they need of
// each server: its address and the means to pause, kill and restart it.
// Backends live in subpackages (local: processes from Debian's packages).
package clusters

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
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
	// Rejoin brings the failed primary back, as a replica of the new one.
	Rejoin(ctx context.Context) error
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
}

// ClockShifter is a node whose wall clock can be shifted without touching
// the host clock.
type ClockShifter interface {
	// ShiftClock sets the node's wall clock to real time + offset, at once.
	ShiftClock(offset time.Duration) error
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
	"redis":  {{"redis-server", "redis-server"}},
	"redis5": {{"redis-server", "redis-server"}},
}

// InstallHint is the command that installs every package locktest uses.
const InstallHint = "sudo ./scripts/install.sh   (or: apt-get update && apt-get install -y redis-server redis-tools iproute2 iptables)"

// Missing returns the requirements of topology that are not on PATH.
func Missing(topology string) []Requirement {
	var out []Requirement
	for _, r := range Requirements[topology] {
		if _, err := exec.LookPath(r.Binary); err != nil {
			out = append(out, r)
		}
	}
	return out
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
