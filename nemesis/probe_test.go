package nemesis

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
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

// A partition whose rules went in only in part (Block failed on one of
// its namespaces) is undone: begin heals what went in, ends the fault as
// failed and frees the slot, and the links it cut carry traffic again.
// (Namespaces of the test's own network only; the missing one is never
// created.)
func TestFailedBeginHeals(t *testing.T) {
	testenv.Require(t, netns.Available())
	id := fmt.Sprintf("%sbegin%d", netns.Prefix, os.Getpid()%100000)
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
	ghost := &netns.Host{Name: "redis-2", NS: id + "-ghost", IP: "198.18.255.254"} // no such namespace
	l, err := server.Listen(server.IP + ":7000")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	addrs := map[*netns.Host]string{server: server.IP + ":7000"}
	pairs := [][2]*netns.Host{{client, server}}
	reached := func() bool { return stillConnected(pairs, addrs, 300*time.Millisecond) != nil }
	require.Eventually(t, reached, 3*time.Second, 10*time.Millisecond)

	env := &Env{Recorder: history.NewRecorder(io.Discard, history.Monotonic(), true), Net: n, TTL: time.Second, Seed: 7}
	p := &partitioner{env: env, ctx: context.Background(), stop: func() {}, addrs: addrs, servers: []*netns.Host{server, ghost}}
	require.True(t, p.claim())
	s := env.drawn(Entry{Nemesis: "partition", Trigger: Trigger{AfterGrant: 1}, Target: RuleHolder, Length: "10s",
		Params: map[string]string{"shape": "isolate-holder"}})
	p.begin(s, "client 1 | redis-1 redis-2", 1, clientPairs(client, p.servers))

	require.False(t, p.busy(), "the slot is free again")
	var ends []string
	for _, e := range env.Recorder.Events() {
		if e.Type == history.FaultEnd {
			ends = append(ends, e.Detail)
		}
	}
	require.Len(t, ends, 1, "the fault ended")
	require.Contains(t, ends[0], "failed: ")
	require.Eventually(t, reached, 2*time.Second, 10*time.Millisecond, "the pair whose rules went in is healed")
}
