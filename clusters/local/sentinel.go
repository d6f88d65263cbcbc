package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/recipe"
)

// The redis-sentinel topology (see recipe.Sentinel): one master, two
// replicas and three Sentinels. Every server has its own writable config
// file in its directory, because Sentinel rewrites them.
//
// Nodes lists the data nodes (redis-1, the first master, then redis-2 and
// redis-3) and then the Sentinels (sentinel-1..3), so the generic server
// faults (pause-server, kill) can hit a Sentinel too.
type sentinelCluster struct {
	cluster // every node, data nodes first: Nodes, Versions
	*recipe.Sentinel
	data      []*redisNode
	sentinels []*redisNode
}

var _ clusters.Failoverer = (*sentinelCluster)(nil)

// sentinelPort is a Sentinel's port inside its own namespace (its usual
// one); the data nodes listen on 6379 in theirs.
const sentinelPort = 26379

// With Spec.Net every data node and every Sentinel runs in its own network
// namespace of the run, with its own address, as the redis5 topology's
// servers do, and the clients in theirs: a partition can cut any of them
// from any other. The Sentinels monitor the master by its namespace
// address and announce their own (sentinel announce-ip), the data nodes
// announce theirs to their master (replica-announce-ip), so every address
// a Sentinel hands a client, before or after a failover, is one the
// clients' namespaces reach through the run's bridge. The harness's own
// connections (readiness, the failover steps) are dialled from inside the
// namespace of the server they go to, which no partition cuts.
func startRedisSentinel(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	c := &sentinelCluster{cluster: cluster{servers[*redisNode]{topology: s.Topology, version: redisVersion}}}
	started := false
	defer func() {
		if !started {
			_ = c.Stop(context.Background())
		}
	}()
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("redis-%d", i)
		n := &redisNode{procNode: procNode{name: name, dir: filepath.Join(s.Dir, "servers", name), tracker: s.Tracker}}
		n.conf = filepath.Join(n.dir, "redis.conf")
		if s.ClockShim {
			if err := n.useClockShim(); err != nil {
				return nil, err
			}
		}
		c.data = append(c.data, n)
		c.nodes = append(c.nodes, n)
	}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("sentinel-%d", i)
		n := &redisNode{procNode: procNode{name: name, dir: filepath.Join(s.Dir, "servers", name), tracker: s.Tracker}, bin: "redis-sentinel", nsPort: sentinelPort}
		n.conf = filepath.Join(n.dir, "sentinel.conf")
		c.sentinels = append(c.sentinels, n)
		c.nodes = append(c.nodes, n)
	}
	if s.Net != nil {
		for _, n := range c.nodes {
			h, err := s.Net.AddHost(n.name)
			if err != nil {
				return nil, err
			}
			n.host = h
		}
	}

	master := c.data[0]
	if err := writeDataConf(master, ""); err != nil {
		return nil, err
	}
	if err := master.start(ctx, 0); err != nil {
		return nil, err
	}
	if err := startAll(ctx, c.data[1:], func(n *redisNode) error { return writeDataConf(n, master.Addr()) }); err != nil {
		return nil, err
	}
	if err := startAll(ctx, c.sentinels, func(n *redisNode) error { return writeSentinelConf(n, master.Addr()) }); err != nil {
		return nil, err
	}
	c.Sentinel = &recipe.Sentinel{}
	for _, n := range c.data {
		c.Sentinel.Data = append(c.Sentinel.Data, n)
	}
	for _, n := range c.sentinels {
		c.Sentinel.Sentinels = append(c.Sentinel.Sentinels, n)
	}
	if s.Net != nil {
		c.Sentinel.Dial = c.dial
		c.Sentinel.Isolate = func(ctx context.Context, node clusters.Node) (func(context.Context) error, error) {
			n := c.node(node.Addr())
			if n == nil || n.host == nil {
				return nil, fmt.Errorf("%s has no network namespace", node.Name())
			}
			if err := s.Net.Isolate(ctx, n.host); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return s.Net.Unisolate(ctx, n.host) }, nil
		}
	}
	if err := c.WaitReady(ctx, recipe.SentinelReadyLimit); err != nil {
		return nil, err
	}
	started = true
	return c, nil
}

// node returns the server at addr, nil if none is.
func (c *sentinelCluster) node(addr string) *redisNode {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// dial connects the harness to the server at addr from inside that
// server's namespace: its own address, reached through the namespace's
// loopback, where neither a partition nor an isolation drops anything.
func (c *sentinelCluster) dial(ctx context.Context, addr string) (net.Conn, error) {
	n := c.node(addr)
	if n == nil || n.host == nil {
		return nil, fmt.Errorf("%s is no server of this topology in a network namespace", addr)
	}
	timeout := 500 * time.Millisecond
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d), time.Millisecond)
	}
	return n.host.Dial(addr, timeout)
}

// startAll writes each node's config with conf and starts the nodes in
// parallel.
func startAll(ctx context.Context, nodes []*redisNode, conf func(*redisNode) error) error {
	return clusters.Each(nodes, func(n *redisNode) error {
		if err := conf(n); err != nil {
			return err
		}
		return n.start(ctx, 0)
	})
}

// writeDataConf writes a data node's config file (recipe.RedisDataConf),
// announcing its namespace address when it has one.
func writeDataConf(n *redisNode, master string) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	conf, err := recipe.RedisDataConf(master)
	if err != nil {
		return err
	}
	if n.host != nil {
		conf += recipe.ReplicaAnnounce(n.host.IP)
	}
	return os.WriteFile(n.conf, []byte(conf), 0o644)
}

// writeSentinelConf writes a Sentinel's own config file, which it rewrites
// as it learns (recipe.SentinelConf), announcing its namespace address when
// it has one.
func writeSentinelConf(n *redisNode, master string) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	conf, err := recipe.SentinelConf(master)
	if err != nil {
		return err
	}
	if n.host != nil {
		conf += recipe.SentinelAnnounce(n.host.IP, sentinelPort)
	}
	return os.WriteFile(n.conf, []byte(conf), 0o644)
}

// Addrs returns the Sentinels' addresses: clients find the master through
// them.
func (c *sentinelCluster) Addrs() []string {
	out := make([]string, len(c.sentinels))
	for i, n := range c.sentinels {
		out[i] = n.Addr()
	}
	return out
}

// Stop stops the Sentinels first, so that stopping the data nodes starts no
// failover, then the data nodes.
func (c *sentinelCluster) Stop(ctx context.Context) error {
	var errs []error
	for _, n := range c.sentinels {
		errs = append(errs, n.stop(ctx))
	}
	for _, n := range c.data {
		errs = append(errs, n.stop(ctx))
	}
	return errors.Join(errs...)
}
