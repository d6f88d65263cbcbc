package matrix_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
)

// The backends' registries say how they start a topology; what it can do
// is declared once in clusters.Topologies. Every declared topology is
// started by the backends it names, and every started one is declared.
func TestTopologyRegistriesAgree(t *testing.T) {
	for _, topo := range clusters.Topologies {
		_, onDocker := docker.Lookup(topo.Name)
		require.Equal(t, topo.RunsOn(clusters.Docker), onDocker, topo.Name)
		require.Equal(t, topo.RunsOn(clusters.Compose), onDocker, topo.Name)
		i := -1
		for j, l := range local.Topologies {
			if l.Name == topo.Name {
				i = j
			}
		}
		require.Equal(t, topo.RunsOn(clusters.Local), i >= 0, topo.Name)
	}
	require.Len(t, local.Topologies, len(clusters.TopologiesOn(clusters.Local)))
	require.Len(t, docker.Topologies, len(clusters.TopologiesOn(clusters.Docker)))
	for _, s := range locks.Schemes {
		for _, topo := range append([]string{s.Topology}, s.Topologies...) {
			_, ok := clusters.LookupTopology(topo)
			require.True(t, ok, "%s runs on %s, which is not declared", s.Name, topo)
		}
	}
}

func TestApplicable(t *testing.T) {
	noRoot := matrix.Machine{NetErr: errors.New("network faults need root")}
	noShim := matrix.Machine{ClockErr: errors.New("no libfaketime")}
	isolate := map[string]string{"failover": nemesis.FailoverIsolate}
	cases := []struct {
		name, lock, topology string
		faults               []string
		params               map[string]string
		m                    matrix.Machine
		want                 matrix.Status
		why                  string
	}{
		{"baseline", "redis-lua", "", []string{"none"}, nil, matrix.Machine{}, matrix.Applies, ""},
		{"delay, local", "redis-lua", "", []string{"delay"}, nil, matrix.Machine{}, matrix.Applies, ""},
		{"delay, not root", "zk", "", []string{"slow-node"}, nil, noRoot, matrix.Skipped, "network faults need root"},
		{"delay on docker", "redis-lua", "", []string{"pause", "delay"}, nil, matrix.Machine{Cluster: "docker"}, matrix.Applies, ""},
		{"proxied baseline on compose", "etcd", "", []string{"proxied"}, nil, matrix.Machine{Cluster: "compose"}, matrix.NotApplicable, "the proxied fault puts a proxy on every client-server link, which --cluster compose does not yet"},
		{"client clock, no validity check", "redis-lua", "", []string{"clock-client"}, nil, matrix.Machine{}, matrix.NotApplicable, "redis-lua never reads its own clock"},
		{"client clock, redlock", "redlock", "", []string{"clock-client"}, nil, matrix.Machine{}, matrix.Applies, ""},
		{"client clock, validity from events", "zk-strict", "", []string{"clock-client"}, nil, matrix.Machine{}, matrix.NotApplicable, "zk-strict never reads its own clock (it learns that it lost the lock from its server"},
		{"failover, no replica", "mysql-unique", "", []string{"failover"}, nil, matrix.Machine{}, matrix.NotApplicable, "topology mysql has no primary with a replica to fail over"},
		{"failover, replicated", "mysql-unique", "mysql-replicated", []string{"failover"}, nil, matrix.Machine{}, matrix.Applies, ""},
		{"clock shim on compose", "redis-lua", "", []string{"clock"}, nil, matrix.Machine{Cluster: "compose"}, matrix.NotApplicable, "--cluster compose cannot add"},
		{"clock shim on zk", "zk", "", []string{"clock"}, nil, matrix.Machine{}, matrix.NotApplicable, "zk3 has none"},
		{"clock without libfaketime", "redis-lua", "", []string{"clock"}, nil, noShim, matrix.Skipped, "no libfaketime"},
		{"clock on docker needs no host shim", "redis-lua", "", []string{"clock"}, nil, matrix.Machine{Cluster: "docker", ClockErr: errors.New("x")}, matrix.Applies, ""},
		{"partition without root", "redis-lua", "", []string{"partition"}, nil, noRoot, matrix.Skipped, "need root"},
		{"isolate without root", "redis-sentinel", "", []string{"failover"}, isolate, noRoot, matrix.Skipped, "need root"},
		{"kill-failover without root", "redis-sentinel", "", []string{"failover"}, nil, noRoot, matrix.Applies, ""},
		{"isolate on docker", "redis-sentinel", "", []string{"failover"}, isolate, matrix.Machine{Cluster: "docker"}, matrix.NotApplicable, "--cluster local only"},
		{"isolate on mysql", "mysql-unique", "mysql-replicated", []string{"failover"}, isolate, matrix.Machine{}, matrix.NotApplicable, "kills its primary"},
		{"combination: n/a if any part is", "redis-lua", "", []string{"pause", "failover"}, nil, matrix.Machine{}, matrix.NotApplicable, "no primary"},
		{"unknown backend", "redis-lua", "", []string{"none"}, nil, matrix.Machine{Cluster: "k8s"}, matrix.Invalid, "unknown cluster backend"},
		{"unknown fault", "redis-lua", "", []string{"flood"}, nil, matrix.Machine{}, matrix.Invalid, "unknown nemesis"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := locks.Lookup(tc.lock)
			require.True(t, ok, tc.lock)
			a := matrix.Applicable(matrix.Cell{Scheme: s, Topology: tc.topology, Faults: tc.faults, Params: tc.params}, tc.m)
			require.Equal(t, tc.want, a.Status, a.Reason())
			require.Contains(t, a.Reason(), tc.why)
			require.Equal(t, tc.want == matrix.Applies, a.Err == nil)
		})
	}
}

// clock-client applies to the schemes that read their own clock, and to
// no other: redlock measures its validity on it; zk-strict checks its
// validity too, but by ZooKeeper's SUSPENDED and expiry events. A new
// scheme must be added here, saying which it is.
func TestClockClientAppliesToSchemesThatReadTheirClock(t *testing.T) {
	readsClock := map[string]bool{
		"redis-setnx": false, "redis-setnx-expire": false, "redis-del": false, "redis-get-del": false,
		"redis-lua": false, "redis-lua-lenient": false, "redlock": true, "redisson": false,
		"redis-sentinel": false, "mysql-optimistic": false, "mysql-for-update": false,
		"mysql-unique": false, "mysql-unique-expiry": false, "mysql-get-lock": false,
		"zk": false, "zk-strict": false, "zk-semaphore": false, "zk-rw": false, "etcd": false,
	}
	require.Len(t, locks.Schemes, len(readsClock), "every scheme says whether it reads its own clock")
	for _, s := range locks.Schemes {
		t.Run(s.Name, func(t *testing.T) {
			want, ok := readsClock[s.Name]
			require.True(t, ok, "%s is not in the table", s.Name)
			a := matrix.Applicable(matrix.Cell{Scheme: s, Faults: []string{"clock-client"}}, matrix.Machine{})
			if want {
				require.Equal(t, matrix.Applies, a.Status, a.Reason())
				return
			}
			require.Equal(t, matrix.NotApplicable, a.Status)
			require.Contains(t, a.Reason(), s.Name+" never reads its own clock")
		})
	}
}
