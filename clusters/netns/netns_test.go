package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/internal/testenv"
)

func needRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, Available())
}

// newNet starts a Net of the test's own (tag tells the tests apart) and
// checks at the end that closing it left no namespace behind.
func newNet(t *testing.T, tag string) *Net {
	t.Helper()
	needRoot(t)
	id := fmt.Sprintf("%s%s%d", Prefix, tag, os.Getpid()%100000)
	n, err := New(id)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, n.Close())
		require.Empty(t, Names(id), "namespaces left behind")
	})
	return n
}

// listen opens a TCP echo-less listener inside h's namespace.
func listen(t *testing.T, h *Host) net.Listener {
	t.Helper()
	var l net.Listener
	require.NoError(t, h.do(func() error {
		var err error
		l, err = net.Listen("tcp", h.IP+":7000")
		return err
	}))
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hi\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l
}

func reach(from, to *Host) error {
	c, err := from.Dial(to.IP+":7000", 300*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 3)
	_, err = c.Read(buf)
	return err
}

// requireReach asserts that from reaches to, trying for up to 3 s: a host
// just added may not pass packets yet on a loaded machine (a first SYN
// lost costs a 1 s retransmit, longer than reach waits).
func requireReach(t *testing.T, from, to *Host, msg ...any) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if err = reach(from, to); err == nil {
			return
		}
	}
	require.NoError(t, err, msg...)
}

func TestPartitionAndHeal(t *testing.T) {
	n := newNet(t, "test")
	a, err := n.AddHost("a")
	require.NoError(t, err)
	b, err := n.AddHost("b")
	require.NoError(t, err)
	c, err := n.AddHost("c")
	require.NoError(t, err)
	require.Len(t, Names(n.id), 4)
	listen(t, a)
	listen(t, b)

	requireReach(t, b, a)
	requireReach(t, c, a)

	ctx := context.Background()
	start := time.Now()
	require.NoError(t, n.Block(ctx, [][2]*Host{{a, c}}))
	t.Logf("block applied in %s", time.Since(start))
	require.Error(t, reach(c, a), "c is cut from a")
	requireReach(t, b, a, "b still reaches a")
	requireReach(t, c, b, "c still reaches b")

	require.NoError(t, n.Heal(ctx))
	requireReach(t, c, a, "healed")

	// One way: what a sends to c is lost; c's packets still reach a.
	require.NoError(t, n.BlockOneWay(ctx, a, c))
	require.Error(t, reach(c, a), "a's answers never reach c")
	require.NoError(t, n.Heal(ctx))
	requireReach(t, c, a)

	// Nothing was added to the root namespace (checked without sending
	// anything: the root namespace's routes lead off this machine).
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	_, runNet, _ := net.ParseCIDR("198.18.0.0/15")
	for _, ad := range addrs {
		ipn, ok := ad.(*net.IPNet)
		require.True(t, !ok || !runNet.Contains(ipn.IP), "root namespace has %s", ad)
	}
}

// A Net that outlives runs (a pooled cluster's) removes each run's client
// hosts: their namespaces go, their blocks are forgotten, and a later host
// never gets a removed host's namespace name or address.
func TestRemoveHost(t *testing.T) {
	n := newNet(t, "rm")
	srv, err := n.AddHost("server")
	require.NoError(t, err)
	listen(t, srv)
	old, err := n.AddHost("client-1")
	require.NoError(t, err)
	require.NoError(t, n.Block(context.Background(), [][2]*Host{{srv, old}}))
	require.Contains(t, n.blocks[srv.NS], old.IP)
	require.NoError(t, n.RemoveHost(old))
	require.NotContains(t, n.blocks[srv.NS], old.IP)
	require.NotContains(t, n.blocks, old.NS)
	require.NoError(t, n.Heal(context.Background()))
	require.NotContains(t, Names(n.id), old.NS)
	require.Error(t, n.RemoveHost(old), "removed twice")
	require.Len(t, n.Hosts(), 1)

	next, err := n.AddHost("client-1") // the next run's client 1
	require.NoError(t, err)
	require.NotEqual(t, old.NS, next.NS)
	require.NotEqual(t, old.IP, next.IP)
	requireReach(t, next, srv)
}

// Isolate cuts a host from every peer, hosts added later included, while
// the host still reaches its own address; Heal (the partitions') leaves the
// isolation alone, Unisolate ends it and keeps the blocks.
func TestIsolate(t *testing.T) {
	n := newNet(t, "ti")
	a, err := n.AddHost("a")
	require.NoError(t, err)
	b, err := n.AddHost("b")
	require.NoError(t, err)
	listen(t, a)
	listen(t, b)
	ctx := context.Background()

	require.NoError(t, n.Isolate(ctx, a))
	require.Error(t, reach(b, a), "isolated: nothing comes in")
	require.Error(t, reach(a, b), "isolated: nothing goes out")
	requireReach(t, a, a, "a still reaches its own address")
	later, err := n.AddHost("later")
	require.NoError(t, err)
	require.Error(t, reach(later, a), "a host added after the isolation is cut too")

	c, err := n.AddHost("c")
	require.NoError(t, err)
	listen(t, c)
	require.NoError(t, n.Block(ctx, [][2]*Host{{b, c}}))
	require.NoError(t, n.Heal(ctx))
	require.Error(t, reach(b, a), "Heal leaves the isolation")
	requireReach(t, b, c, "and heals the blocks")

	require.NoError(t, n.Block(ctx, [][2]*Host{{a, c}}))
	require.NoError(t, n.Unisolate(ctx, a))
	requireReach(t, b, a, "unisolated")
	requireReach(t, a, b)
	require.Error(t, reach(c, a), "the block between a and c stays")
	require.NoError(t, n.Heal(ctx))
	requireReach(t, c, a)
}

// Reattach (a restarted container: a fresh namespace under the same name)
// writes the host's blackhole routes (BlockOneWay, lost-reply) into the new
// namespace too, not only its firewall blocks: without them a lost-reply
// in progress quietly ended with the restart.
func TestReattachKeepsRoutes(t *testing.T) {
	n := newNet(t, "ra")
	// A process in a namespace of its own. Only once unshare has run is
	// its namespace not ours: attaching before would name the root
	// namespace, and the routes would go into the host's.
	proc := func() int {
		cmd := exec.Command("unshare", "-n", "sleep", "30")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pid := cmd.Process.Pid
		require.Eventually(t, func() bool {
			return notOurs(pid) == nil
		}, 5*time.Second, 5*time.Millisecond, "unshare -n never left our namespace")
		return pid
	}
	client, err := n.AddHost("client-1")
	require.NoError(t, err)
	server, err := n.Attach("redis-1", proc(), "198.18.99.1")
	require.NoError(t, err)
	routes := func() string {
		out, err := exec.Command("ip", "-n", server.NS, "route", "show").CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	ctx := context.Background()
	require.NoError(t, n.BlockOneWay(ctx, server, client))
	require.Contains(t, routes(), "blackhole "+client.IP)
	require.NoError(t, n.Reattach(ctx, server, proc()))
	require.Contains(t, routes(), "blackhole "+client.IP, "the route in the new namespace")
	require.NoError(t, n.Heal(ctx))
	require.NotContains(t, routes(), "blackhole")
}

// Attach refuses a process in the harness's own network namespace: its
// blocks and routes would land in the host's.
func TestAttachRefusesOurNamespace(t *testing.T) {
	n := newNet(t, "ar")
	_, err := n.Attach("redis-1", os.Getpid(), "198.18.99.1")
	require.ErrorContains(t, err, "harness's own network namespace")
	h, err := n.AddHost("client-1")
	require.NoError(t, err)
	require.ErrorContains(t, n.Reattach(context.Background(), h, os.Getpid()), "harness's own network namespace")
}
