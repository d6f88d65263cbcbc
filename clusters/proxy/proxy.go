// Package proxy puts a Toxiproxy proxy (github.com/Shopify/toxiproxy/v2,
// used as a library) on every link between a client and a server of a run,
// so that a fault can make one link, one client's links or one server's
// links slow, lossy, stalled or reset.
//
// Placement. Each client process lives in its own network namespace. A
// link's proxy listens inside that namespace, on the client's own address,
// and DNAT rules in the namespace's nat table send every TCP connection
// the client opens to a server's address (whichever way the client learnt
// it: its configuration, Sentinel naming the master, a member list) to the
// proxy of that link; the proxy opens its own connection to the server
// from the same namespace, marked netns.BypassMark so that the DNAT rules
// leave it alone. On the wire a proxied connection is still client address
// to server address: the partitions' DROP rules (filter table, by peer
// address) cut it as they cut a direct one, and their probes (marked too)
// test the wire, not the proxy. The proxies run in the harness process, so
// they go with it; the rules go with the client's namespace.
//
// What bypasses the proxies: the servers' links among themselves
// (replication, ZooKeeper's quorum, etcd's peers, Sentinel's hellos and
// its watch of the master): those are not client links.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/rs/zerolog"

	"github.com/locktest/locktest/clusters/netns"
)

// Server is one end of the links: a server process of the cluster.
type Server struct {
	Name string // e.g. "redis-1"
	Addr string // host:port clients dial
}

// Set is a run's proxies: one per link (client namespace, server).
type Set struct {
	servers []Server
	api     *toxiproxy.ApiServer
	seed    int64

	mu      sync.Mutex
	links   map[*netns.Host][]*Link
	closed  bool
	counter atomic.Int64 // toxic names and per-toxic seeds
}

// New returns the proxies of a run whose clients reach servers; none is
// in place until AddClient. seed seeds the random choices of the toxics
// (jitter, loss).
func New(servers []Server, seed int64) *Set {
	// Toxiproxy logs through zerolog, some of it (the bandwidth toxic)
	// through zerolog's global logger: nothing of it belongs on a run's
	// output. (Nothing else in locktest uses zerolog.)
	zerolog.SetGlobalLevel(zerolog.Disabled)
	logger := zerolog.Nop()
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger)
	return &Set{servers: slices.Clone(servers), api: api, seed: seed, links: map[*netns.Host][]*Link{}}
}

// Servers returns the servers the links lead to.
func (s *Set) Servers() []Server { return slices.Clone(s.servers) }

// setupTimeout bounds the proof that a new link's proxy is in place.
const setupTimeout = 2 * time.Second

// AddClient puts a proxy on each of h's links and redirects the
// connections h's processes open to the servers through them. It proves
// each proxy in place: a connection opened as the client would open one
// must reach it. An error leaves nothing of h's in place.
func (s *Set) AddClient(ctx context.Context, h *netns.Host) error {
	var links []*Link
	var rs []netns.Redirect
	fail := func(err error) error {
		for _, l := range links {
			l.close()
		}
		_ = h.SetRedirects(context.Background(), nil)
		return fmt.Errorf("proxies of %s: %w", h.Name, err)
	}
	for _, srv := range s.servers {
		l, err := s.listen(h, srv)
		if err != nil {
			return fail(err)
		}
		links = append(links, l)
		rs = append(rs, netns.Redirect{From: srv.Addr, To: l.ln.Addr().String()})
	}
	if err := h.SetRedirects(ctx, rs); err != nil {
		return fail(err)
	}
	for _, l := range links {
		if err := l.proveInPlace(); err != nil {
			return fail(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fail(errors.New("the run's proxies are closed"))
	}
	s.links[h] = links
	return nil
}

// listen starts the proxy of the link from h to srv.
func (s *Set) listen(h *netns.Host, srv Server) (*Link, error) {
	ln, err := h.Listen(net.JoinHostPort(h.IP, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for %s: %w", srv.Name, err)
	}
	name := h.Name + "->" + srv.Name
	p := toxiproxy.NewProxy(s.api, name, ln.Addr().String(), srv.Addr)
	l := &Link{Client: h, Server: srv, set: s, ln: ln, proxy: p, conns: map[*net.TCPConn]bool{}}
	go l.serve()
	return l, nil
}

// Close takes every proxy away; AddClient fails afterwards.
func (s *Set) Close() {
	s.mu.Lock()
	s.closed = true
	all := s.links
	s.links = map[*netns.Host][]*Link{}
	s.mu.Unlock()
	for _, links := range all {
		for _, l := range links {
			l.close()
		}
	}
}

// ClientLinks returns h's links, in the servers' order.
func (s *Set) ClientLinks(h *netns.Host) []*Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.links[h])
}

// ServerLinks returns every client's link to the server named name.
func (s *Set) ServerLinks(name string) []*Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Link
	for _, links := range s.links {
		for _, l := range links {
			if l.Server.Name == name {
				out = append(out, l)
			}
		}
	}
	slices.SortFunc(out, func(a, b *Link) int { return strings.Compare(a.Client.Name, b.Client.Name) })
	return out
}

// Link is the proxy of one client-server link.
type Link struct {
	Client *netns.Host
	Server Server

	set   *Set
	ln    net.Listener
	proxy *toxiproxy.Proxy

	accepted atomic.Int64 // connections the proxy accepted from the client

	mu     sync.Mutex
	conns  map[*net.TCPConn]bool // both ends of every proxied connection
	ups    []string              // local addresses of the proxy's connections to the server
	abrupt bool                  // close connections with a reset (the reset fault)
	closed bool
}

// Accepted is how many connections the link's proxy has accepted.
func (l *Link) Accepted() int64 { return l.accepted.Load() }

// UpstreamAddrs are the local addresses (client address and port) of the
// connections the proxy opened to the server: what the server sees as its
// clients on this link.
func (l *Link) UpstreamAddrs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ups)
}

// upstreamTimeout bounds the proxy's connect to the server. A client's
// own connect, through the proxy, ends at its own deadline.
const upstreamTimeout = 10 * time.Second

// serve accepts the client's connections and joins each to one of its own
// to the server, through the link's toxics.
func (l *Link) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.accepted.Add(1)
		go l.join(c.(*net.TCPConn))
	}
}

// join connects client to the server through the toxics, both ways.
func (l *Link) join(client *net.TCPConn) {
	up, err := l.Client.Dial(l.Server.Addr, upstreamTimeout)
	if err != nil {
		// Refused or cut: the client sees its connection reset.
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	server := up.(*net.TCPConn)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	l.conns[client], l.conns[server] = true, true
	l.ups = append(l.ups, server.LocalAddr().String())
	if l.abrupt {
		_ = client.SetLinger(0)
		_ = server.SetLinger(0)
	}
	l.mu.Unlock()
	name := client.RemoteAddr().String()
	l.proxy.Toxics.StartLink(l.set.api, name+"upstream", client, server, stream.Upstream)
	l.proxy.Toxics.StartLink(l.set.api, name+"downstream", server, client, stream.Downstream)
}

// close stops the link's proxy and closes its connections.
func (l *Link) close() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[*net.TCPConn]bool{}
	l.mu.Unlock()
	_ = l.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
}

// proveInPlace opens a connection as the client would and checks that the
// link's proxy accepted it.
func (l *Link) proveInPlace() error {
	before := l.Accepted()
	c, err := l.Client.DialAsClient(l.Server.Addr, setupTimeout)
	if err != nil {
		return fmt.Errorf("a connection to %s (%s) through its proxy: %w", l.Server.Name, l.Server.Addr, err)
	}
	defer c.Close()
	// Accept happens in the proxy's goroutine: wait for its count.
	deadline := time.Now().Add(setupTimeout)
	for l.Accepted() == before && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if l.Accepted() == before {
		return fmt.Errorf("a connection to %s (%s) did not go through its proxy", l.Server.Name, l.Server.Addr)
	}
	return nil
}
