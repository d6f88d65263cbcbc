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
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/recipe"
)

// ZooKeeper ensemble: plain java processes of Debian's zookeeper package,
// each with its own zoo.cfg, data directory and address. tickTime is
// 200 ms so elections take about a second; the session timeouts clients may
// ask for span 2 to 600 ticks (0.4 s to 120 s).

// ZKJar is Debian's ZooKeeper server jar (its manifest names the jars it
// needs); the log4j jars give it a log file.
const ZKJar = "/usr/share/java/zookeeper.jar"

var zkClasspath = []string{ZKJar, "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"}

// zkNode is one ZooKeeper server.
type zkNode struct{ procNode }

// zkCluster is a started ZooKeeper ensemble.
type zkCluster struct {
	servers[*zkNode]
}

var (
	_ clusters.Cluster = (*zkCluster)(nil)
	_ clusters.Leader  = (*zkCluster)(nil)
	_ clusters.Hosted  = (*zkNode)(nil)
)

// startZK starts a 3-node ensemble and returns once a leader is elected and
// every node serves.
func startZK(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	return startZKN(ctx, s, 3)
}

func startZKN(ctx context.Context, s clusters.Spec, count int) (clusters.Cluster, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, clusters.MissingError([]clusters.Requirement{{Binary: "java", Package: "zookeeper"}})
	}
	if _, err := os.Stat(ZKJar); err != nil {
		return nil, clusters.MissingError([]clusters.Requirement{{Binary: ZKJar, Package: "zookeeper"}})
	}
	type ports struct{ client, peer, elect int }
	ps := make([]ports, count)
	ips := make([]string, count)
	c := &zkCluster{servers[*zkNode]{topology: "zk3", version: zkVersion}}
	if s.Net == nil {
		free, err := loopbackPorts(3 * count)
		if err != nil {
			return nil, err
		}
		for i := range ps {
			ps[i] = ports{free[3*i], free[3*i+1], free[3*i+2]}
			ips[i] = "127.0.0.1"
		}
	}
	for i := 0; i < count; i++ {
		n := &zkNode{procNode{name: fmt.Sprintf("zk-%d", i+1), dir: filepath.Join(s.Dir, "servers", fmt.Sprintf("zk-%d", i+1)), tracker: s.Tracker, logName: "stdout.log"}}
		if s.Net != nil {
			h, err := s.Net.AddHost(n.name)
			if err != nil {
				return nil, err
			}
			n.host = h
			ps[i] = ports{2181, 2888, 3888}
			ips[i] = h.IP
		}
		c.nodes = append(c.nodes, n)
	}
	peers := make([]recipe.ZKPeer, len(c.nodes))
	for i := range c.nodes {
		peers[i] = recipe.ZKPeer{IP: ips[i], PeerPort: ps[i].peer, ElectPort: ps[i].elect}
	}
	for i, n := range c.nodes {
		n.addr = net.JoinHostPort(ips[i], strconv.Itoa(ps[i].client))
		data := filepath.Join(n.dir, "data")
		if err := os.MkdirAll(filepath.Join(n.dir, "log"), 0o755); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		cfg := recipe.ZKConfig(data, ps[i].client, ips[i], peers)
		files := map[string]string{
			"zoo.cfg":          cfg,
			"log4j.properties": recipe.ZKLog4j,
			"data/myid":        fmt.Sprintf("%d\n", i+1),
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(n.dir, name), []byte(body), 0o644); err != nil {
				return nil, err
			}
		}
		n.argv = append([]string{"java", "-cp", n.dir + ":" + strings.Join(zkClasspath, ":")}, recipe.ZKJVMFlags...)
		n.argv = append(n.argv,
			"-Dzookeeper.log.dir="+filepath.Join(n.dir, "log"),
			"-Dlog4j.configuration=file:"+filepath.Join(n.dir, "log4j.properties"),
			recipe.ZKMain, filepath.Join(n.dir, "zoo.cfg"))
	}
	for _, n := range c.nodes {
		if err := n.launch(); err != nil {
			_ = c.Stop(context.Background())
			return nil, err
		}
	}
	if err := c.waitServing(ctx, 60*time.Second); err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return c, nil
}

// waitServing waits until every running node serves and one of them leads.
func (c *zkCluster) waitServing(ctx context.Context, limit time.Duration) error {
	if err := clusters.Each(c.nodes, func(n *zkNode) error {
		return n.waitReady(ctx, limit, func() error { _, err := n.mode(); return err })
	}); err != nil {
		return err
	}
	_, err := c.Leader(ctx)
	return err
}

// mode returns "leader" or "follower" once the node serves requests.
func (n *zkNode) mode() (string, error) { return recipe.ZKMode(n.dial, n.name, n.addr) }

// Probe says whether the member runs and serves as a member of a quorum
// (it says its mode; clusters.Prober).
func (n *zkNode) Probe(context.Context) error {
	return probe(n.name, n.PID(), func() error { _, err := n.mode(); return err })
}

// Restart starts the server again after a kill, with its data directory as
// it was (ZooKeeper logs every transaction before it acknowledges it; a
// member that came back empty would be a different failure). It returns
// once the node serves again.
func (n *zkNode) Restart(ctx context.Context) error {
	return n.relaunch(ctx, func() error { _, err := n.mode(); return err })
}

// KeepsData reports that a restarted member comes back with its data
// directory, as such a server does in production (the kill fault says so).
func (n *zkNode) KeepsData() bool { return true }

// RSS returns the server's resident memory in bytes (0 while down).
func (n *zkNode) RSS() int64 { return n.rss() }

// Leader returns the node that says it leads, asking every running node.
func (c *zkCluster) Leader(ctx context.Context) (clusters.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	i, err := recipe.ZKLeader(ctx, func() []recipe.ZKMember {
		out := make([]recipe.ZKMember, len(c.nodes))
		for i, n := range c.nodes {
			out[i] = recipe.ZKMember{Running: n.PID() != 0, Mode: n.mode}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	return c.nodes[i], nil
}

func zkVersion() string {
	// The versioned jar beside it carries the version (zookeeper-3.8.0.jar).
	m, _ := filepath.Glob(filepath.Join(filepath.Dir(ZKJar), "zookeeper-[0-9]*.jar"))
	if len(m) == 0 {
		return "zookeeper (version unknown)"
	}
	return "zookeeper " + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), "zookeeper-"), ".jar")
}
