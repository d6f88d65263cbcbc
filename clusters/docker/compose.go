package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/locktest/locktest/clusters"
)

// ComposeProjectEnv narrows --cluster compose to one compose project when
// several stacks run.
const ComposeProjectEnv = "LOCKTEST_COMPOSE_PROJECT"

// Compose attaches to a stack a user started with `docker compose up` from
// the repository's docker-compose.yml: it finds the running containers
// labelled locktest.topology=<topology> and runs faults against them. It
// creates and removes nothing; Stop leaves every container running and
// thawed.
type Compose struct {
	// Project, when set, takes only containers of that compose project
	// (default: $LOCKTEST_COMPOSE_PROJECT, else any).
	Project string
}

// Name returns "compose".
func (Compose) Name() string { return "compose" }

// Start finds the stack's containers, waits until every server serves and
// they form their topology (for mysql-replicated, it makes the second
// server a replica of the first if it is not one yet). The clock fault is
// not available (the stack runs without the shim).
func (b Compose) Start(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	t, ok := Lookup(s.Topology)
	want := t.Nodes
	if !ok {
		return nil, fmt.Errorf("compose backend: topology %q is not supported (supported: %s)", s.Topology, strings.Join(Names(), ", "))
	}
	if s.ClockShim {
		return nil, errors.New("compose backend: the clock fault needs the clock shim, which only --cluster docker sets up")
	}
	cli, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	project := b.Project
	if project == "" {
		project = os.Getenv(ComposeProjectEnv)
	}
	f := filters.NewArgs(filters.Arg("label", LabelTopology+"="+s.Topology))
	if project != "" {
		f.Add("label", "com.docker.compose.project="+project)
	}
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("list containers: %w", err)
	}
	c := &cluster{cli: cli, topology: s.Topology, runID: s.RunID}
	projects := map[string]bool{}
	for _, ct := range list {
		name := ct.Labels[LabelNode]
		if name == "" {
			continue
		}
		projects[ct.Labels["com.docker.compose.project"]] = true
		if ct.State != "running" {
			cli.Close()
			return nil, fmt.Errorf("compose backend: container %s (%s) is %s; bring the stack up with `docker compose --profile <profile> up -d --wait`", strings.TrimPrefix(ct.Names[0], "/"), name, ct.State)
		}
		var netName, ip string
		for nn, es := range ct.NetworkSettings.Networks {
			if es.IPAddress != "" && (netName == "" || nn < netName) {
				netName, ip = nn, es.IPAddress
			}
		}
		if ip == "" {
			cli.Close()
			return nil, fmt.Errorf("compose backend: container %s has no IPv4 address", name)
		}
		if c.netName != "" && c.netName != netName {
			cli.Close()
			return nil, fmt.Errorf("compose backend: the %s containers are on several networks (%s, %s)", s.Topology, c.netName, netName)
		}
		c.netName = netName
		role, port, ok := roleOf(name)
		if !ok {
			cli.Close()
			return nil, fmt.Errorf("compose backend: container %s has %s=%s, which is no server name locktest knows", strings.TrimPrefix(ct.Names[0], "/"), LabelNode, name)
		}
		n := &node{c: c, name: name, role: role, kind: t.Kind, dir: filepath.Join(s.Dir, "servers", name), ip: ip, port: port, id: ct.ID, img: ct.Image}
		if role == roleMySQL {
			n.mysql = newMySQLAdmin(n.Addr())
		}
		c.nodes = append(c.nodes, n)
	}
	if len(projects) > 1 {
		cli.Close()
		return nil, fmt.Errorf("compose backend: %d compose projects run topology %s; pick one with %s", len(projects), s.Topology, ComposeProjectEnv)
	}
	if len(c.nodes) != want {
		cli.Close()
		return nil, fmt.Errorf("compose backend: found %d containers labelled %s=%s, want %d; start them with `docker compose --profile %s up -d --wait`", len(c.nodes), LabelTopology, s.Topology, want, ComposeProfile(s.Topology))
	}
	// Data nodes before sentinels, each in order (redis-1 first).
	sort.Slice(c.nodes, func(i, j int) bool {
		a, b := c.nodes[i], c.nodes[j]
		if (a.role == roleSentinel) != (b.role == roleSentinel) {
			return b.role == roleSentinel
		}
		return a.name < b.name
	})
	for _, n := range c.nodes {
		s.Tracker.AddCompose(n.id)
	}
	for _, n := range c.nodes {
		if err := n.refreshPID(ctx); err != nil {
			_ = c.Stop(context.Background())
			return nil, err
		}
		// A stack just brought up may still be starting (compose v1 has
		// no --wait): as long as the docker backend waits for its own.
		if err := n.waitReady(ctx, n.readyLimit()); err != nil {
			_ = c.Stop(context.Background())
			return nil, err
		}
	}
	if s.NetID != "" {
		nw, err := cli.NetworkInspect(ctx, c.netName, network.InspectOptions{})
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("inspect network %s: %w", c.netName, err)
		}
		c.bridge = nw.Options["com.docker.network.bridge.name"]
		if c.bridge == "" {
			c.bridge = "br-" + nw.ID[:12]
		}
		for _, cfg := range nw.IPAM.Config {
			if p, err := netip.ParsePrefix(cfg.Subnet); err == nil && p.Addr().Is4() {
				c.subnet = p
			}
		}
		if !c.subnet.IsValid() {
			cli.Close()
			return nil, fmt.Errorf("network %s has no IPv4 subnet", c.netName)
		}
		if err := c.joinNet(s.NetID); err != nil {
			_ = c.Stop(context.Background())
			return nil, err
		}
	}
	out, err := c.form(ctx, s)
	if err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return out, nil
}

// roleOf tells a server's role and port from its name (the
// locktest.node label): redis-N, sentinel-N, zk-N, etcd-N, mysql-N.
func roleOf(name string) (role string, port int, ok bool) {
	prefix, _, found := strings.Cut(name, "-")
	if !found {
		return "", 0, false
	}
	switch prefix {
	case "redis":
		return roleRedis, portRedis, true
	case "sentinel":
		return roleSentinel, portSentinel, true
	case "zk":
		return roleZK, portZK, true
	case "etcd":
		return roleEtcd, portEtcd, true
	case "mysql":
		return roleMySQL, portMySQL, true
	}
	return "", 0, false
}

// ComposeProfile is the docker-compose.yml profile that starts topology.
func ComposeProfile(topology string) string {
	switch topology {
	case "redis5":
		return "redlock"
	case "redis-sentinel":
		return "sentinel"
	}
	return topology
}
