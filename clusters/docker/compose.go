package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

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
func (Compose) Name() string { return string(clusters.Compose) }

// Start finds the stack's containers, waits until every server serves and
// they form their topology (for mysql-replicated, it makes the second
// server a replica of the first if it is not one yet). The clock fault is
// not available (the stack runs without the shim).
func (b Compose) Start(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	t, ok := Lookup(s.Topology)
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
	cts, err := selectCompose(list, t, project, composeUp)
	if err != nil {
		cli.Close()
		return nil, err
	}
	c := &cluster{cli: cli, topology: s.Topology, runID: s.RunID}
	for _, ct := range cts {
		c.netName = ct.network
		n := &node{c: c, name: ct.node, role: ct.role, kind: t.Kind, dir: filepath.Join(s.Dir, "servers", ct.node), ip: ct.ip, port: ct.port, id: ct.id, img: ct.image}
		if ct.role == roleMySQL {
			n.mysql = newMySQLAdmin(n.Addr())
		}
		c.nodes = append(c.nodes, n)
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

// composeContainer is what Start takes of a server container of a stack.
type composeContainer struct {
	id, node, image string // container id, locktest.node, image
	role            string
	port            int
	ip, network     string
}

// selectCompose picks the server containers of topology t from list (the
// containers labelled with it; project is the one asked for, "" for any),
// or says what is wrong with the stack and what to do: several compose
// projects run t (checked first: the other checks would compare containers
// of different stacks), a server that is not running, one with no IPv4
// address, servers on several networks, a locktest.node label locktest does
// not know, too few or too many servers. up(project, profile) is the
// command that brings a stack up.
func selectCompose(list []container.Summary, t Topology, project string, up func(project, profile string) string) ([]composeContainer, error) {
	profile := ComposeProfile(t.Name)
	projects := map[string]bool{}
	for _, ct := range list {
		if ct.Labels[LabelNode] != "" {
			projects[ct.Labels["com.docker.compose.project"]] = true
		}
	}
	if len(projects) > 1 {
		var names []string
		for p := range projects {
			names = append(names, p)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("compose backend: %d compose projects run topology %s (%s); pick one with %s=NAME", len(names), t.Name, strings.Join(names, ", "), ComposeProjectEnv)
	}
	var out []composeContainer
	for _, ct := range list {
		name := ct.Labels[LabelNode]
		if name == "" {
			continue
		}
		cname := strings.TrimPrefix(strings.Join(ct.Names, ","), "/")
		if ct.State != "running" {
			return nil, fmt.Errorf("compose backend: container %s (%s) is %s; bring the stack up with `%s`", cname, name, ct.State, up(ct.Labels["com.docker.compose.project"], profile))
		}
		var netName, ip string
		if ct.NetworkSettings != nil {
			for nn, es := range ct.NetworkSettings.Networks {
				if es != nil && es.IPAddress != "" && (netName == "" || nn < netName) {
					netName, ip = nn, es.IPAddress
				}
			}
		}
		if ip == "" {
			return nil, fmt.Errorf("compose backend: container %s (%s) has no IPv4 address", cname, name)
		}
		if len(out) > 0 && out[0].network != netName {
			return nil, fmt.Errorf("compose backend: the %s containers are on several networks (%s, %s)", t.Name, out[0].network, netName)
		}
		role, port, ok := roleOf(name)
		if !ok {
			return nil, fmt.Errorf("compose backend: container %s has %s=%s, which is no server name locktest knows", cname, LabelNode, name)
		}
		out = append(out, composeContainer{id: ct.ID, node: name, image: ct.Image, role: role, port: port, ip: ip, network: netName})
	}
	if len(out) != t.Nodes {
		return nil, fmt.Errorf("compose backend: found %d containers labelled %s=%s, want %d; start them with `%s`", len(out), LabelTopology, t.Name, t.Nodes, up(project, profile))
	}
	return out, nil
}

// composeUp is the command that brings profile up on this machine, in
// project when given: `docker compose ... up -d --wait` where the compose
// plugin (v2) is installed, `docker-compose ... up -d` with Debian's v1
// (it has no --wait; the harness waits for the servers to serve).
func composeUp(project, profile string) string {
	cmd, v2 := ComposeCommand()
	var b strings.Builder
	b.WriteString(cmd)
	if project != "" {
		b.WriteString(" -p " + project)
	}
	b.WriteString(" --profile " + profile + " up -d")
	if v2 {
		b.WriteString(" --wait")
	}
	return b.String()
}

var composeCmd struct {
	once sync.Once
	cmd  string
	v2   bool
}

// ComposeCommand is how this machine runs compose: "docker compose" (the
// v2 plugin; v2 true) or "docker-compose" (v1, or the v2 program of that
// name); "docker compose" when neither answers (what Docker documents).
func ComposeCommand() (cmd string, v2 bool) {
	composeCmd.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if exec.CommandContext(ctx, "docker", "compose", "version").Run() == nil {
			composeCmd.cmd, composeCmd.v2 = "docker compose", true
			return
		}
		if p, err := exec.LookPath("docker-compose"); err == nil {
			composeCmd.cmd = "docker-compose"
			// v1 is a Python program (2.5 s to say its version here);
			// v2's standalone docker-compose is not.
			if head, err := readHead(p, 64); err == nil && strings.HasPrefix(head, "#!") && strings.Contains(head, "python") {
				return
			}
			out, err := exec.CommandContext(ctx, p, "version", "--short").Output()
			composeCmd.v2 = err == nil && !strings.HasPrefix(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), "1.")
			return
		}
		composeCmd.cmd, composeCmd.v2 = "docker compose", true
	})
	return composeCmd.cmd, composeCmd.v2
}

// readHead reads the first n bytes of the file at path.
func readHead(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if k > 0 {
		err = nil
	}
	return string(b[:k]), err
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
