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

// etcd cluster: etcd-server processes of Debian's package (etcd 3.4), each
// with its own data directory and client and peer URLs on harness-owned
// addresses. Heartbeat 100 ms and election timeout 500 ms, so a new leader
// is elected within about a second.

// etcdNode is one etcd member.
type etcdNode struct {
	procNode
	peerAddr string
}

// etcdCluster is a started etcd cluster.
type etcdCluster struct {
	servers[*etcdNode]
}

var (
	_ clusters.Cluster = (*etcdCluster)(nil)
	_ clusters.Leader  = (*etcdCluster)(nil)
	_ clusters.Hosted  = (*etcdNode)(nil)
)

func startEtcd(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	return startEtcdN(ctx, s, 3)
}

func startEtcdN(ctx context.Context, s clusters.Spec, count int) (clusters.Cluster, error) {
	c := &etcdCluster{servers[*etcdNode]{topology: "etcd3", version: etcdVersion}}
	var free []int
	if s.Net == nil {
		var err error
		if free, err = loopbackPorts(2 * count); err != nil {
			return nil, err
		}
	}
	var initial []string
	for i := 0; i < count; i++ {
		n := &etcdNode{procNode: procNode{name: fmt.Sprintf("etcd-%d", i+1), dir: filepath.Join(s.Dir, "servers", fmt.Sprintf("etcd-%d", i+1)), tracker: s.Tracker, logName: "etcd.log"}}
		ip, cport, pport := "127.0.0.1", 0, 0
		if s.Net != nil {
			h, err := s.Net.AddHost(n.name)
			if err != nil {
				return nil, err
			}
			n.host, ip, cport, pport = h, h.IP, 2379, 2380
		} else {
			cport, pport = free[2*i], free[2*i+1]
		}
		n.addr = net.JoinHostPort(ip, strconv.Itoa(cport))
		n.peerAddr = net.JoinHostPort(ip, strconv.Itoa(pport))
		initial = append(initial, n.name+"=http://"+n.peerAddr)
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return nil, err
		}
		n.argv = recipe.EtcdArgs(n.name, filepath.Join(n.dir, "data"), n.addr, n.addr, n.peerAddr, n.peerAddr, strings.Join(initial, ","))
	}
	for _, n := range c.nodes {
		if err := n.launch(); err != nil {
			_ = c.Stop(context.Background())
			return nil, err
		}
	}
	if err := clusters.Each(c.nodes, func(n *etcdNode) error { return n.waitReady(ctx, 30*time.Second, n.healthy) }); err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	if _, err := c.Leader(ctx); err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return c, nil
}

// healthy asks /health, which says true once the member has a leader and
// serves.
func (n *etcdNode) healthy() error {
	return recipe.EtcdHealthy(recipe.EtcdHTTP(n.dial), n.name, n.addr)
}

// Probe says whether the member runs and is healthy (clusters.Prober).
func (n *etcdNode) Probe(context.Context) error { return probe(n.name, n.PID(), n.healthy) }

// status returns the member's id and the id of the leader it knows.
func (n *etcdNode) status() (member, leader string, err error) {
	return recipe.EtcdStatus(recipe.EtcdHTTP(n.dial), n.name, n.addr)
}

// Restart starts the member again with its data directory (an etcd member
// that lost its data must be removed and added again: another failure).
func (n *etcdNode) Restart(ctx context.Context) error { return n.relaunch(ctx, n.healthy) }

// KeepsData reports that a restarted member comes back with its data
// directory, as such a server does in production (the kill fault says so).
func (n *etcdNode) KeepsData() bool { return true }

// RSS returns the member's resident memory in bytes (0 while down).
func (n *etcdNode) RSS() int64 { return n.rss() }

// Leader returns the member that a majority of the running members name
// as leader, and that names itself.
func (c *etcdCluster) Leader(ctx context.Context) (clusters.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	i, err := recipe.EtcdLeader(ctx, func() []recipe.EtcdMember {
		out := make([]recipe.EtcdMember, len(c.nodes))
		for i, n := range c.nodes {
			out[i] = recipe.EtcdMember{Running: n.PID() != 0, Status: n.status}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	return c.nodes[i], nil
}

var (
	etcdVersionOnce sync.Once
	etcdVersionStr  string
)

func etcdVersion() string {
	etcdVersionOnce.Do(func() {
		etcdVersionStr = "etcd (version unknown)"
		out, err := exec.Command("etcd", "--version").Output()
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "etcd Version: "); ok {
				etcdVersionStr = "etcd " + strings.TrimSpace(v)
			}
		}
	})
	return etcdVersionStr
}
