package clusters

import (
	"fmt"
	"slices"
	"strings"
)

// BackendName names a cluster backend: where a run's servers run.
type BackendName string

// The cluster backends.
const (
	Local   BackendName = "local"   // processes from the host's Debian packages (clusters/local)
	Docker  BackendName = "docker"  // containers the run creates (clusters/docker)
	Compose BackendName = "compose" // a stack started from docker-compose.yml (clusters/docker)
)

// BackendInfo is what a backend can do, whatever the topology.
type BackendInfo struct {
	Name BackendName
	// ClockShim: it can start servers under the per-server clock shim
	// (compose cannot add it to a stack that is already running).
	ClockShim bool
	// IsolatesPrimary: it can cut a primary off the network with the
	// harness's own namespaces (failover=isolate).
	IsolatesPrimary bool
	// HostBinaries: it runs the servers from this host's packages
	// (Requirements), so a missing package skips the topology.
	HostBinaries bool
}

// Backends declares every backend, in the order the CLI names them.
var Backends = []BackendInfo{
	{Name: Local, ClockShim: true, IsolatesPrimary: true, HostBinaries: true},
	{Name: Docker, ClockShim: true},
	{Name: Compose},
}

// ParseBackend reads a --cluster value.
func ParseBackend(s string) (BackendInfo, error) {
	for _, b := range Backends {
		if string(b.Name) == s {
			return b, nil
		}
	}
	names := make([]string, len(Backends))
	for i, b := range Backends {
		names[i] = string(b.Name)
	}
	return BackendInfo{}, fmt.Errorf("unknown cluster backend %q (this build has: %s)", s, strings.Join(names, ", "))
}

// TopologyInfo is what a topology can do: the one declaration the harness,
// the campaigns and the faults read (the backends keep only how they start
// it).
type TopologyInfo struct {
	Name string
	// FailsOver: a primary with a replica; the started cluster is a
	// Failoverer (the failover fault needs one).
	FailsOver bool
	// ClockShim: its servers can run under the per-server clock shim
	// (Spec.ClockShim), their nodes are ClockShifters. ZooKeeper and etcd
	// cannot: libfaketime slows the JVM about 25-fold, etcd reads the
	// clock through the vDSO, and both expire sessions and leases on
	// monotonic clocks anyway.
	ClockShim bool
	// IsolatesPrimary: started with Spec.Net on a backend that
	// BackendInfo.IsolatesPrimary, the cluster is an Isolator (the
	// failover fault's failover=isolate).
	IsolatesPrimary bool
	// Backends are the backends that run it.
	Backends []BackendName
}

var allBackends = []BackendName{Local, Docker, Compose}

// Topologies declares every topology.
var Topologies = []TopologyInfo{
	{Name: "redis", ClockShim: true, Backends: allBackends},
	{Name: "redis5", ClockShim: true, Backends: allBackends},
	{Name: "redis-sentinel", FailsOver: true, ClockShim: true, IsolatesPrimary: true, Backends: allBackends},
	{Name: "mysql", ClockShim: true, Backends: allBackends},
	{Name: "mysql-replicated", FailsOver: true, ClockShim: true, Backends: allBackends},
	{Name: "zk3", Backends: allBackends},
	{Name: "etcd3", Backends: allBackends},
}

// LookupTopology returns the declaration of the topology named name.
func LookupTopology(name string) (TopologyInfo, bool) {
	i := slices.IndexFunc(Topologies, func(t TopologyInfo) bool { return t.Name == name })
	if i < 0 {
		return TopologyInfo{}, false
	}
	return Topologies[i], true
}

// RunsOn reports whether backend b runs the topology.
func (t TopologyInfo) RunsOn(b BackendName) bool { return slices.Contains(t.Backends, b) }

// TopologiesOn lists the topologies backend b runs.
func TopologiesOn(b BackendName) []string {
	var out []string
	for _, t := range Topologies {
		if t.RunsOn(b) {
			out = append(out, t.Name)
		}
	}
	return out
}
