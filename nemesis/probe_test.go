package nemesis

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/testenv"
)

// stillConnected tells a partition that cuts from one that does not: a
// connection to a server across a pair goes through before the rules, and
// not after them, both for a cut both ways and for answers dropped
// (lost-reply: the SYN goes through, the SYN-ACK does not).
func TestStillConnected(t *testing.T) {
	testenv.Require(t, netns.Available())
	id := fmt.Sprintf("%sprobe%d", netns.Prefix, os.Getpid()%100000)
	n, err := netns.New(id)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, n.Close())
		require.Empty(t, netns.Names(id), "namespaces left behind")
	})
	client, err := n.AddHost("client-1")
	require.NoError(t, err)
	server, err := n.AddHost("redis-1")
	require.NoError(t, err)
	other, err := n.AddHost("client-2") // nothing listens there
	require.NoError(t, err)
	l, err := server.Listen(server.IP + ":7000")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	addrs := map[*netns.Host]string{server: server.IP + ":7000"}
	pairs := [][2]*netns.Host{{client, other}, {server, client}}
	ctx := context.Background()

	// Before the rules: the probe goes through (a host just added may
	// lose its first SYN on a loaded machine: retry for 3 s).
	reached := func() bool {
		err := stillConnected(pairs, addrs, 300*time.Millisecond)
		return err != nil
	}
	require.Eventually(t, reached, 3*time.Second, 10*time.Millisecond)
	err = stillConnected(pairs, addrs, 300*time.Millisecond)
	require.ErrorIs(t, err, ErrPartitionNoEffect)
	require.ErrorContains(t, err, "client-1 still connected to redis-1")

	require.NoError(t, n.Block(ctx, [][2]*netns.Host{{client, server}}))
	require.NoError(t, stillConnected(pairs, addrs, 300*time.Millisecond), "a cut pair")

	require.NoError(t, n.Heal(ctx))
	require.Eventually(t, reached, 3*time.Second, 10*time.Millisecond)
	require.NoError(t, n.BlockOneWay(ctx, server, client))
	require.NoError(t, stillConnected(pairs, addrs, 300*time.Millisecond), "answers dropped")
}
