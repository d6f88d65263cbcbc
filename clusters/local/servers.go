package local

import (
	"context"

	"github.com/locktest/locktest/clusters"
)

// server is a node of the local backend: it stops with its cluster.
type server interface {
	clusters.Node
	stop(ctx context.Context) error
}

// servers is what every local cluster kind shares: its nodes in order and
// what clusters.Cluster asks of them. A kind embeds it and overrides what
// differs (MariaDB lists the primary first, Sentinel's clients get the
// Sentinels' addresses and its Sentinels stop first).
type servers[N server] struct {
	topology string
	nodes    []N
	version  func() string // the servers' version, for the run's record
}

func (c *servers[N]) Topology() string { return c.topology }

func (c *servers[N]) Nodes() []clusters.Node {
	out := make([]clusters.Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n
	}
	return out
}

// Addrs lists the nodes' addresses, in order.
func (c *servers[N]) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Versions names each node with the servers' version.
func (c *servers[N]) Versions() []string {
	v := c.version()
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Name() + ": " + v
	}
	return out
}

// Stop stops every node in parallel.
func (c *servers[N]) Stop(ctx context.Context) error {
	return clusters.Each(c.nodes, func(n N) error { return n.stop(ctx) })
}
