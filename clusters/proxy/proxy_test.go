package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/testenv"
)

var netSeq atomic.Int64

// redisNet starts a real redis-server in a network namespace of its own,
// one client namespace, and the proxies of that client's link.
func redisNet(t testing.TB) (*Set, *netns.Net, *netns.Host, clusters.Cluster) {
	t.Helper()
	return proxiedNet(t, "redis")
}

// proxiedNet is redisNet for topology: every server in a namespace of its
// own, one client namespace, and the proxies of that client's links.
func proxiedNet(t testing.TB, topology string) (*Set, *netns.Net, *netns.Host, clusters.Cluster) {
	t.Helper()
	testenv.Require(t, netns.Available())
	testenv.Require(t, clusters.Check(topology))
	id := fmt.Sprintf("%spx%d%d", netns.Prefix, os.Getpid()%100000, netSeq.Add(1))
	n, err := netns.New(id)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = n.Close()
		require.Empty(t, netns.Names(id), "namespaces left behind")
	})
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: topology, Dir: t.TempDir(), Net: n})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	h, err := n.AddHost("client-1")
	require.NoError(t, err)
	var servers []Server
	for _, node := range cl.Nodes() {
		servers = append(servers, Server{Name: node.Name(), Addr: node.Addr()})
	}
	s := New(servers, 1)
	t.Cleanup(s.Close)
	require.NoError(t, s.AddClient(context.Background(), h))
	return s, n, h, cl
}

// command sends one inline command on c and returns the first line of the
// answer, or the whole bulk reply.
func command(t testing.TB, c net.Conn, cmd string) string {
	t.Helper()
	_, err := fmt.Fprintf(c, "%s\r\n", cmd)
	require.NoError(t, err)
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	if !strings.HasPrefix(line, "$") {
		return line
	}
	var size int
	_, err = fmt.Sscanf(line, "$%d", &size)
	require.NoError(t, err)
	buf := make([]byte, size+2)
	_, err = io.ReadFull(r, buf)
	require.NoError(t, err)
	return string(buf[:size])
}

// Every connection the client makes to the server goes through the link's
// proxy: the server's CLIENT LIST shows, from the client's address, only
// connections the proxy opened (their local addresses), and the proxy
// counted every connection the client opened.
func TestEveryClientConnectionIsProxied(t *testing.T) {
	s, _, h, cl := redisNet(t)
	addr := cl.Nodes()[0].Addr()
	link := s.ClientLinks(h)[0]
	before := link.Accepted()
	var conns []net.Conn
	for range 4 {
		c, err := h.DialAsClient(addr, 2*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.Equal(t, "+PONG\r\n", command(t, c, "PING"))
		conns = append(conns, c)
	}
	require.Equal(t, before+4, link.Accepted(), "the proxy accepted every connection")
	list := command(t, conns[0], "CLIENT LIST")
	ups := link.UpstreamAddrs()
	seen := 0
	for _, m := range regexp.MustCompile(`addr=(\S+)`).FindAllStringSubmatch(list, -1) {
		if strings.HasPrefix(m[1], h.IP+":") {
			require.Contains(t, ups, m[1], "a connection from the client's address the proxy did not open")
			seen++
		}
	}
	require.Equal(t, 4, seen, "the server sees the client's 4 connections:\n%s", list)
}

// An address a protocol hands out goes through the proxies too: the
// master Sentinel names, dialled as the client would (go-redis's failover
// client does), is reached through the proxy of the client's link to that
// data node.
func TestSentinelsMasterIsProxied(t *testing.T) {
	s, _, h, cl := proxiedNet(t, "redis-sentinel")
	byAddr := map[string]*Link{}
	var sentinel *Link
	for _, l := range s.ClientLinks(h) {
		byAddr[l.Server.Addr] = l
		if strings.HasPrefix(l.Server.Name, "sentinel-") && sentinel == nil {
			sentinel = l
		}
	}
	require.NotNil(t, sentinel, "no Sentinel among %v", cl.Addrs())
	c, err := h.DialAsClient(sentinel.Server.Addr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "SENTINEL get-master-addr-by-name %s\r\n", clusters.SentinelMaster)
	require.NoError(t, err)
	r := bufio.NewReader(c)
	var fields []string
	for len(fields) < 2 {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if line = strings.TrimSpace(line); !strings.HasPrefix(line, "*") && !strings.HasPrefix(line, "$") {
			fields = append(fields, line)
		}
	}
	master := net.JoinHostPort(fields[0], fields[1])
	link := byAddr[master]
	require.NotNil(t, link, "Sentinel named %s, which is no server's address", master)
	before := link.Accepted()
	m, err := h.DialAsClient(master, 2*time.Second)
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, "+PONG\r\n", command(t, m, "PING"))
	require.Equal(t, before+1, link.Accepted(), "the connection to the master Sentinel named went through its proxy")
}

// A partition holds with the proxies in place: the partition's DROP rules
// cut what the proxy sends on to the server, and the partition's own probe
// (a marked connection from the client's namespace) tests the wire, not
// the proxy; healed, the link works again.
func TestPartitionHoldsThroughTheProxy(t *testing.T) {
	s, n, h, cl := redisNet(t)
	server := cl.Nodes()[0].(clusters.Hosted).Host()
	addr := cl.Nodes()[0].Addr()
	require.NoError(t, n.Block(context.Background(), [][2]*netns.Host{{h, server}}))
	_, err := h.Dial(addr, 300*time.Millisecond)
	require.Error(t, err, "the partition's probe went through")
	m, err := s.ClientLinks(h)[0].Probe(context.Background(), 500*time.Millisecond)
	require.NoError(t, err)
	require.Zero(t, m.Bytes, "an answer crossed the partition through the proxy")
	require.NoError(t, n.Heal(context.Background()))
	m, err = s.ClientLinks(h)[0].Probe(context.Background(), 2*time.Second)
	require.NoError(t, err)
	require.Positive(t, m.Bytes, "healed: %+v", m)
}

// Each toxic is in effect as it goes in, measured by the link's probe, and
// gone once removed.
func TestToxicsTakeEffect(t *testing.T) {
	s, _, h, _ := redisNet(t)
	link := s.ClientLinks(h)[0]
	base, err := link.Probe(context.Background(), 2*time.Second)
	require.NoError(t, err)
	require.Positive(t, base.Bytes)
	for _, tc := range []struct {
		name  string
		toxic Toxic
		check func(t *testing.T, m Measure)
	}{
		{"delay both ways", Toxic{Kind: Delay, Direction: Both, Latency: 150 * time.Millisecond, Jitter: 20 * time.Millisecond}, func(t *testing.T, m Measure) {
			require.GreaterOrEqual(t, m.FirstByte, 2*130*time.Millisecond, "%+v", m)
		}},
		{"delay on answers only", Toxic{Kind: Delay, Direction: Downstream, Latency: 150 * time.Millisecond}, func(t *testing.T, m Measure) {
			require.GreaterOrEqual(t, m.FirstByte, 150*time.Millisecond, "%+v", m)
		}},
		{"stall", Toxic{Kind: Stall, Direction: Both}, func(t *testing.T, m Measure) {
			require.True(t, m.Silent, "%+v", m)
		}},
		{"reset", Toxic{Kind: Reset, Direction: Upstream}, func(t *testing.T, m Measure) {
			require.True(t, m.Reset, "%+v", m)
		}},
		{"bandwidth", Toxic{Kind: Bandwidth, Direction: Downstream, RateKB: 1}, func(t *testing.T, m Measure) {
			// about 1 KB of INFO at 1 KB/s
			require.GreaterOrEqual(t, m.FirstByte, time.Duration(m.Bytes)*time.Millisecond/2, "%+v", m)
		}},
		{"loss", Toxic{Kind: Loss, Direction: Downstream, Share: 0.5}, func(t *testing.T, m Measure) {
			// Half the chunks lost: one of 10 answers (at most) comes a
			// retransmission timeout late.
			for i := 0; i < 10 && m.FirstByte < initialRTO; i++ {
				var err error
				m, err = link.Probe(context.Background(), 5*time.Second)
				require.NoError(t, err)
			}
			require.GreaterOrEqual(t, m.FirstByte, initialRTO, "%+v", m)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove, err := s.Apply([]*Link{link}, tc.toxic)
			require.NoError(t, err)
			m, err := link.Probe(context.Background(), 1500*time.Millisecond)
			require.NoError(t, err)
			tc.check(t, m)
			require.NoError(t, remove())
			m, err = link.Probe(context.Background(), 2*time.Second)
			require.NoError(t, err)
			require.Positive(t, m.Bytes, "removed: %+v", m)
			require.Less(t, m.FirstByte, 100*time.Millisecond, "removed: %+v", m)
		})
	}
}
