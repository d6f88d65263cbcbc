package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

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

func startRedisSentinel(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	if s.Net != nil {
		return nil, errors.New("the redis-sentinel topology runs on loopback only: it has no network namespaces yet")
	}
	c := &sentinelCluster{cluster: cluster{topology: s.Topology}}
	started := false
	defer func() {
		if !started {
			_ = c.Stop(context.Background())
		}
	}()
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("redis-%d", i)
		n := &redisNode{name: name, dir: filepath.Join(s.Dir, "servers", name), tracker: s.Tracker}
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
		n := &redisNode{name: name, dir: filepath.Join(s.Dir, "servers", name), tracker: s.Tracker, bin: "redis-sentinel"}
		n.conf = filepath.Join(n.dir, "sentinel.conf")
		c.sentinels = append(c.sentinels, n)
		c.nodes = append(c.nodes, n)
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
	if err := c.WaitReady(ctx, recipe.SentinelReadyLimit); err != nil {
		return nil, err
	}
	started = true
	return c, nil
}

// startAll writes each node's config with conf and starts the nodes in
// parallel.
func startAll(ctx context.Context, nodes []*redisNode, conf func(*redisNode) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := conf(n); err != nil {
				errs[i] = err
				return
			}
			errs[i] = n.start(ctx, 0)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeDataConf writes a data node's config file (recipe.RedisDataConf).
func writeDataConf(n *redisNode, master string) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	conf, err := recipe.RedisDataConf(master)
	if err != nil {
		return err
	}
	return os.WriteFile(n.conf, []byte(conf), 0o644)
}

// writeSentinelConf writes a Sentinel's own config file, which it rewrites
// as it learns (recipe.SentinelConf).
func writeSentinelConf(n *redisNode, master string) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	conf, err := recipe.SentinelConf(master)
	if err != nil {
		return err
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
