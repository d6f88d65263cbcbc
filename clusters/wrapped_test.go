package clusters

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// bareCluster is a Cluster and nothing else.
type bareCluster struct{ topology string }

func (c bareCluster) Topology() string             { return c.topology }
func (bareCluster) Nodes() []Node                  { return nil }
func (bareCluster) Addrs() []string                { return nil }
func (bareCluster) Versions() []string             { return nil }
func (bareCluster) Stop(ctx context.Context) error { return nil }

// primaried is a Cluster with a primary.
type primaried struct{ bareCluster }

func (primaried) Primary() Node { return nil }

// grouped is a Cluster with server groups.
type grouped struct{ bareCluster }

func (grouped) ServerGroups() [][]Node { return [][]Node{{}, {}} }

// wrapper wraps a cluster.
type wrapper struct{ Cluster }

func (w wrapper) Unwrap() Cluster { return w.Cluster }

// groupedWrapper is a wrapper with ServerGroups of its own.
type groupedWrapper struct{ wrapper }

func (groupedWrapper) ServerGroups() [][]Node { return [][]Node{{}} }

func TestAsFindsTheWrappedClustersInterfaces(t *testing.T) {
	inner := primaried{bareCluster{"mysql-replicated"}}

	// A bare type assertion on the wrapper misses what the cluster inside
	// has (the bug As is for).
	var cl Cluster = wrapper{Cluster: inner}
	_, ok := cl.(Primaried)
	require.False(t, ok)
	_, ok = As[Primaried](cl)
	require.True(t, ok, "As must look inside the wrapper")

	// Through two wrappers, and not at all when nothing has it.
	cl = wrapper{Cluster: wrapper{Cluster: inner}}
	_, ok = As[Primaried](cl)
	require.True(t, ok)
	_, ok = As[Leader](cl)
	require.False(t, ok)
	_, ok = As[Leader](nil)
	require.False(t, ok)

	// The wrapper's own method comes first.
	cl = groupedWrapper{wrapper{Cluster: grouped{bareCluster{"redis-sentinel"}}}}
	g, ok := As[Grouped](cl)
	require.True(t, ok)
	require.Len(t, g.ServerGroups(), 1, "the wrapper's ServerGroups, not the inner one's")
}
