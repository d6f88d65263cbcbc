// Package matrix decides, in one place, whether a cell of the matrix
// (a lock scheme under some faults, on a topology, on a cluster backend)
// can run: whether each fault can matter to the scheme there, and whether
// this machine can inject it. `locktest run`, `campaign`, `bench`, `list`
// and `doctor` all ask Applicable, so that a run never reports a verdict
// on a cell the campaign calls n/a.
//
// It reads the declarations: nemesis.Info.Needs for the faults,
// clusters.Topologies and clusters.Backends for the servers, locks.Traits
// for what a scheme promises. It sits above those packages and below
// harness and campaigns, which both import it (campaigns imports harness,
// so the rule could live in neither without one copying the other).
package matrix

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/recipe"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/nemesis"
)

// Status is the kind of answer Applicable gives.
type Status int

const (
	// Applies: the cell can run here.
	Applies Status = iota
	// NotApplicable: a fault cannot matter to the scheme, or cannot be
	// injected on the topology or backend, on any machine.
	NotApplicable
	// Skipped: the fault applies, but this machine cannot inject it or
	// lacks the servers (root, libfaketime, a package, a docker image).
	Skipped
	// Invalid: the cell names a fault or backend that does not exist.
	Invalid
)

func (s Status) String() string {
	switch s {
	case Applies:
		return "applies"
	case NotApplicable:
		return "n/a"
	case Skipped:
		return "skipped"
	}
	return "invalid"
}

// Answer is Applicable's answer: a status and, unless the cell applies,
// the one-line reason.
type Answer struct {
	Status Status
	Err    error // why not; nil when the cell applies
}

// Reason is the one-line reason, "" when the cell applies.
func (a Answer) Reason() string {
	if a.Err == nil {
		return ""
	}
	return a.Err.Error()
}

func answer(st Status, format string, args ...any) Answer {
	return Answer{Status: st, Err: fmt.Errorf(format, args...)}
}

// Cell is what Applicable looks at.
type Cell struct {
	Scheme   locks.Scheme
	Topology string   // "" for the scheme's own
	Faults   []string // nemesis names ("none" or none at all: no fault)
	Params   map[string]string
}

// Machine is what this machine can do, and the backend the cell runs on.
// Probe fills it in; tests set it by hand (the zero value: everything
// works, on the local backend).
type Machine struct {
	// Cluster is the backend the servers run on, a clusters.BackendName
	// ("" for local).
	Cluster string
	// NetErr says why the network layer cannot work here (nil: it can).
	NetErr error
	// ClockErr says why the clock shim cannot work on this host (the local
	// backend's servers), nil when it can.
	ClockErr error
	// Missing lists the packages a topology lacks on this host (the local
	// backend); nil: none.
	Missing func(topology string) []clusters.Requirement
	// DockerErr says why the docker backend cannot run a topology here
	// (no engine, no image of its servers); nil as a whole: it can run
	// them all.
	DockerErr func(topology string) error
}

// Probe looks at this machine: root and the tools of the network layer,
// libfaketime for clock jumps, the server packages of each topology.
func Probe() Machine {
	m := Machine{NetErr: nemesis.NetUnavailable(netns.Available()), Missing: clusters.Missing}
	if err := clusters.CheckClockShim(); err != nil {
		m.ClockErr = fmt.Errorf("the clock fault: %w", err)
	}
	return m
}

// DockerProbe returns the Machine.DockerErr of this machine: whether the
// docker backend can run a topology here, looked up once per kind of
// server (it never pulls an image).
func DockerProbe(ctx context.Context) func(topology string) error {
	seen := map[string]error{}
	return func(topology string) error {
		t, ok := docker.Lookup(topology)
		if !ok {
			return nil // not run there: n/a, which Applicable said first
		}
		if err, ok := seen[t.Kind]; ok {
			return err
		}
		err := docker.Available(ctx, t.Kind, nil)
		seen[t.Kind] = err
		return err
	}
}

// Applicable says whether cell c can run on machine m: Applies, or
// NotApplicable with the reason (a fault that cannot matter to the
// scheme, or that the topology or backend cannot take), or Skipped with
// the reason (this machine cannot inject it, or lacks the servers).
func Applicable(c Cell, m Machine) Answer {
	s := c.Scheme
	topology := c.Topology
	if topology == "" {
		topology = s.Topology
	}
	backend := m.Cluster
	if backend == "" {
		backend = string(clusters.Local)
	}
	b, err := clusters.ParseBackend(backend)
	if err != nil {
		return Answer{Status: Invalid, Err: err}
	}
	if !s.RunsOn(topology) {
		return answer(NotApplicable, "lock %s does not run on topology %q (it runs on: %s)", s.Name, topology, strings.Join(append([]string{s.Topology}, s.Topologies...), ", "))
	}
	t, ok := clusters.LookupTopology(topology)
	if !ok {
		return answer(Invalid, "unknown topology %q", topology)
	}
	if !t.RunsOn(b.Name) {
		return answer(NotApplicable, "--cluster %s runs the topologies %s; %s runs only on --cluster %s", b.Name, strings.Join(clusters.TopologiesOn(b.Name), ", "), topology, joinBackends(t.Backends))
	}
	var all nemesis.Needs
	for _, name := range c.Faults {
		info, ok := nemesis.Lookup(name)
		if !ok {
			return answer(Invalid, "unknown nemesis %q (known: %s)", name, strings.Join(nemesis.Names(), ", "))
		}
		n := info.NeedsWith(c.Params)
		if a := fits(name, n, s, t, b); a.Status != Applies {
			return a
		}
		all.Net = all.Net || n.Net
		all.ClockShim = all.ClockShim || n.ClockShim
	}
	return onMachine(topology, all, b, m)
}

// fits says whether fault name, with needs n, can matter to scheme s on
// topology t and backend b.
func fits(name string, n nemesis.Needs, s locks.Scheme, t clusters.TopologyInfo, b clusters.BackendInfo) Answer {
	switch {
	case n.Failover && !t.FailsOver:
		return answer(NotApplicable, "topology %s has no primary with a replica to fail over", t.Name)
	case n.ClockShim && !b.ClockShim:
		return answer(NotApplicable, "the %s fault needs the clock shim, which --cluster %s cannot add to a running stack: use --cluster %s", name, b.Name, clusters.Docker)
	case n.ClockShim && !t.ClockShim:
		return answer(NotApplicable, "the %s fault needs the clock shim, which only the Redis and MySQL topologies have; %s has none (ZooKeeper and etcd expire sessions on monotonic clocks)", name, t.Name)
	case n.OwnClock && !s.ReadsOwnClock():
		return answer(NotApplicable, "the %s fault cannot matter to lock %s: %s never reads its own clock (%s)", name, s.Name, s.Name, clockFreeBecause(s))
	case n.Proxies && b.Name == clusters.Compose:
		return answer(NotApplicable, "the %s fault puts a proxy on every client-server link, which --cluster %s does not yet (use --cluster %s or %s)", name, clusters.Compose, clusters.Local, clusters.Docker)
	case n.IsolatesPrimary && !b.IsolatesPrimary:
		return answer(NotApplicable, "--param %s runs on --cluster %s only", n.Setting, clusters.Local)
	case n.IsolatesPrimary && !t.IsolatesPrimary:
		return answer(NotApplicable, "--param %s needs a topology that can cut its primary off the network (%s); %s kills its primary (%s=%s)", n.Setting, strings.Join(isolating(), ", "), t.Name, name, nemesis.FailoverKill)
	}
	return Answer{}
}

// onMachine says whether this machine can run topology on backend b with
// faults that need all.
func onMachine(topology string, all nemesis.Needs, b clusters.BackendInfo, m Machine) Answer {
	if b.HostBinaries && m.Missing != nil {
		if missing := m.Missing(topology); len(missing) > 0 {
			return Answer{Status: Skipped, Err: clusters.MissingError(missing)}
		}
	}
	if b.Name == clusters.Docker && m.DockerErr != nil {
		if err := m.DockerErr(topology); err != nil {
			return Answer{Status: Skipped, Err: err}
		}
	}
	if all.Net && m.NetErr != nil {
		return Answer{Status: Skipped, Err: m.NetErr}
	}
	if all.ClockShim && b.HostBinaries && m.ClockErr != nil {
		return Answer{Status: Skipped, Err: m.ClockErr}
	}
	return Answer{}
}

// clockFreeBecause says why scheme s, which never reads its own clock,
// needs none.
func clockFreeBecause(s locks.Scheme) string {
	if s.ChecksValidity {
		return "it learns that it lost the lock from its server, not from its clock"
	}
	return "it checks no lease validity"
}

func isolating() []string {
	var out []string
	for _, t := range clusters.Topologies {
		if t.IsolatesPrimary {
			out = append(out, t.Name)
		}
	}
	return out
}

func joinBackends(bs []clusters.BackendName) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = string(b)
	}
	return strings.Join(s, ", ")
}

// KnownParam reports whether some fault, scheme or topology reads the
// --param key, and whether a run of scheme on topology with faults
// reads it; for_ names the faults, schemes or topologies that do.
func KnownParam(key, scheme, topology string, faults []string) (known, applies bool, for_ string) {
	if f, ok := nemesis.ParamFault(key); ok {
		return true, slices.Contains(faults, f), "the " + f + " fault"
	}
	if schemes, ok := locks.VariantParam(key); ok {
		return true, slices.Contains(schemes, scheme), strings.Join(schemes, ", ")
	}
	i := slices.IndexFunc(recipe.Params, func(p recipe.Param) bool { return p.Name == key })
	if i < 0 {
		return false, false, ""
	}
	p := recipe.Params[i]
	for _, name := range strings.Split(p.For, ",") {
		if name = strings.TrimSpace(name); name == topology || name == scheme {
			return true, true, p.For
		}
	}
	return true, false, p.For
}

// ParamNames lists every --param key: the faults', then the servers'.
func ParamNames() []string {
	names := nemesis.ParamNames()
	for _, p := range recipe.Params {
		names = append(names, p.Name)
	}
	for _, v := range locks.Variants {
		if !slices.Contains(names, v.Key) {
			names = append(names, v.Key)
		}
	}
	return names
}
