// Package netns gives every server node and client process of a run its own
// network namespace and address, joined through a bridge that lives in a
// private "switch" namespace of the run. Nothing is added to the root
// namespace: no bridge, no veth end, no route, no firewall rule. Partitions
// are DROP rules inside the namespaces involved.
//
// Addresses come from 198.18.0.0/15, the range RFC 2544 sets aside for
// benchmarking networks: it is never routed anywhere, and it exists only
// inside the run's own namespaces.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace locktest creates; `locktest
// cleanup` removes stale ones by it.
const Prefix = "lt"

// Available says why the network layer cannot work here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network faults need root (network namespaces and their firewall rules)")
	}
	for _, b := range []string{"ip", "iptables-restore"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found: install it with `apt-get install -y iproute2 iptables`", b)
		}
	}
	return nil
}

// Net is one run's network.
type Net struct {
	id     string // run id, e.g. "lt0142a3f1"
	sw     string // switch namespace
	mu     sync.Mutex
	hosts  []*Host
	blocks map[string]map[string]dir // host -> peer -> what is dropped
	routes [][2]*Host                // blackhole routes: in [0]'s namespace, to [1]
	// isolated hosts drop every packet on their eth0 (Isolate), whatever
	// the blocks say; Heal leaves them, Unisolate ends them.
	isolated map[string]bool
	added    int // hosts AddHost made, removed ones included: names and addresses are never reused

	// A joined Net (see Join): no switch namespace.
	bridge   string
	plen     int
	ipAt     func(int) (string, error)
	bridged  int      // hosts made by AddHost
	attached int      // hosts named by Attach
	vethRoot []string // root-side veth ends of bridged hosts
}

// dir says which directions of a host's traffic with a peer are dropped.
type dir uint8

const (
	dropIn  dir = 1 << iota // packets from the peer
	dropOut                 // packets to the peer
)

// Host is one namespace with one address.
type Host struct {
	Name string // e.g. "redis-1", "client-3"
	NS   string // namespace name
	IP   string
	idx  int
}

// New creates the switch namespace with its bridge. id must be short (it
// prefixes interface-free names only) and unique per run.
func New(id string) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	n := &Net{id: id, sw: id + "-sw", blocks: map[string]map[string]dir{}, isolated: map[string]bool{}}
	if err := ip("netns", "add", n.sw); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"-n", n.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", n.sw, "link", "set", "br0", "up"},
		{"-n", n.sw, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			_ = n.Close()
			return nil, err
		}
	}
	return n, nil
}

// Names lists the namespaces of run id that exist now (for cleanup).
func Names(id string) []string { return list(id + "-") }

// All lists every namespace whose name starts with Prefix.
func All() []string { return list(Prefix) }

func list(prefix string) []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			names = append(names, f[0])
		}
	}
	return names
}

// AddHost creates a namespace for name, with an address on the bridge.
func (n *Net) AddHost(name string) (*Host, error) {
	if n.bridge != "" {
		return n.addBridged(name)
	}
	n.mu.Lock()
	n.added++
	idx := n.added
	n.mu.Unlock()
	if idx > 250*250 {
		return nil, errors.New("too many hosts")
	}
	h := &Host{Name: name, NS: fmt.Sprintf("%s-h%d", n.id, idx), IP: fmt.Sprintf("198.18.%d.%d", idx/250, idx%250+1), idx: idx}
	veth := fmt.Sprintf("v%d", idx)
	steps := [][]string{
		{"netns", "add", h.NS},
		{"-n", n.sw, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{"-n", n.sw, "link", "set", veth, "master", "br0"},
		{"-n", n.sw, "link", "set", veth, "up"},
		{"-n", h.NS, "addr", "add", h.IP + "/15", "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			_ = ip("netns", "del", h.NS)
			return nil, fmt.Errorf("add host %s: %w", name, err)
		}
	}
	n.mu.Lock()
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	return h, nil
}

// RemoveHost deletes h's namespace (the processes in it must be gone) and
// forgets h and every block that names it. A Net that outlives one run (a
// pooled cluster's) removes each run's client hosts this way; the names and
// addresses of removed hosts are not handed out again.
func (n *Net) RemoveHost(h *Host) error {
	n.mu.Lock()
	i := slices.Index(n.hosts, h)
	if i >= 0 {
		n.hosts = slices.Delete(n.hosts, i, i+1)
	}
	delete(n.blocks, h.NS)
	delete(n.isolated, h.NS)
	for _, peers := range n.blocks {
		delete(peers, h.IP)
	}
	n.routes = slices.DeleteFunc(n.routes, func(r [2]*Host) bool { return r[0] == h || r[1] == h })
	n.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("remove host %s: not a host of this network", h.Name)
	}
	return ip("netns", "del", h.NS)
}

// Hosts returns every host.
func (n *Net) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Host(nil), n.hosts...)
}

// Command returns argv run inside h's namespace (`ip netns exec`, which
// execs argv in place: the pid is argv's own).
func (h *Host) Command(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", h.NS}, argv...)
}

// BypassMark is the firewall mark (SO_MARK) of the harness's own
// connections from inside a namespace: the run's link proxies
// (clusters/proxy) redirect every other connection a client makes to a
// server, and leave the marked ones alone, so that the proxies' own
// connections to the servers and the partitions' probes go straight to
// the server.
const BypassMark = 0x4c54

// Dial opens a TCP connection from inside h's namespace, straight to addr:
// marked with BypassMark, it bypasses the run's link proxies.
func (h *Host) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, BypassMark)
		}); err != nil {
			return err
		}
		return serr
	}}
	return h.dial(d, addr)
}

// DialAsClient opens a TCP connection from inside h's namespace as the
// client process there would: through the run's link proxy to addr when
// the run has one.
func (h *Host) DialAsClient(addr string, timeout time.Duration) (net.Conn, error) {
	return h.dial(net.Dialer{Timeout: timeout}, addr)
}

func (h *Host) dial(d net.Dialer, addr string) (net.Conn, error) {
	var conn net.Conn
	err := h.do(func() error {
		var err error
		conn, err = d.Dial("tcp", addr)
		return err
	})
	return conn, err
}

// Listen opens a TCP listener inside h's namespace (for probes and tests:
// a connection to it succeeds once the kernel queues it, accepted or not).
func (h *Host) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := h.do(func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// do runs f on an OS thread switched into h's namespace. Sockets keep the
// namespace they were made in, so a connection opened by f works from any
// goroutine afterwards.
func (h *Host) do(f func() error) error {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(orig)
	target, err := unix.Open("/var/run/netns/"+h.NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the wrong namespace: leave it locked so
		// the runtime ends it with this goroutine instead of reusing it.
		return errors.Join(ferr, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Block makes every pair (a, b) unable to talk, in both directions, on top
// of what is already blocked.
func (n *Net) Block(ctx context.Context, pairs [][2]*Host) error {
	n.mu.Lock()
	touched := map[*Host]bool{}
	for _, p := range pairs {
		a, b := p[0], p[1]
		if a == b {
			continue
		}
		for _, x := range [][2]*Host{{a, b}, {b, a}} {
			n.drop(x[0], x[1], dropIn|dropOut)
			touched[x[0]] = true
		}
	}
	n.mu.Unlock()
	return n.apply(ctx, touched)
}

// BlockOneWay drops what from sends to to, and nothing else: requests from
// to still reach from, their replies are lost (TCP delivers them late, once
// healed). It is a blackhole route in from's namespace (3 ms, against
// 5-20 ms for a firewall rule set: this fault is aimed at one request in
// flight, and every millisecond lets another client take the lock first).
func (n *Net) BlockOneWay(ctx context.Context, from, to *Host) error {
	if err := ip("-n", from.NS, "route", "add", "blackhole", to.IP+"/32"); err != nil {
		return err
	}
	n.mu.Lock()
	n.routes = append(n.routes, [2]*Host{from, to})
	n.mu.Unlock()
	return nil
}

func (n *Net) drop(h, peer *Host, d dir) {
	if n.blocks[h.NS] == nil {
		n.blocks[h.NS] = map[string]dir{}
	}
	n.blocks[h.NS][peer.IP] |= d
}

// Isolate cuts h off the network: every packet into or out of its eth0 is
// dropped (DROP rules in its own namespace), whoever the peer is, hosts
// added later included. Connections from inside h's namespace to h's own
// address (the harness's, through loopback) still work. Heal leaves an
// isolation in place: it belongs to whoever called Isolate (the failover
// fault's isolate mode), which ends it with Unisolate; Close ends it with
// the namespace.
func (n *Net) Isolate(ctx context.Context, h *Host) error {
	n.mu.Lock()
	n.isolated[h.NS] = true
	n.mu.Unlock()
	return n.apply(ctx, map[*Host]bool{h: true})
}

// Unisolate ends Isolate(h); the blocks that name h stay.
func (n *Net) Unisolate(ctx context.Context, h *Host) error {
	n.mu.Lock()
	delete(n.isolated, h.NS)
	n.mu.Unlock()
	return n.apply(ctx, map[*Host]bool{h: true})
}

// Heal removes every block (Block, BlockOneWay); isolations stay (see
// Isolate).
func (n *Net) Heal(ctx context.Context) error {
	n.mu.Lock()
	touched := map[*Host]bool{}
	for _, h := range n.hosts {
		if len(n.blocks[h.NS]) > 0 {
			touched[h] = true
		}
	}
	n.blocks = map[string]map[string]dir{}
	routes := n.routes
	n.routes = nil
	n.mu.Unlock()
	var errs []error
	for _, r := range routes {
		if err := ip("-n", r[0].NS, "route", "del", "blackhole", r[1].IP+"/32"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, n.apply(ctx, touched))...)
}

// apply writes the full rule set of each touched host in one
// iptables-restore, in parallel.
func (n *Net) apply(ctx context.Context, touched map[*Host]bool) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for h := range touched {
		n.mu.Lock()
		var peers []string
		dirs := map[string]dir{}
		for ip, d := range n.blocks[h.NS] {
			peers = append(peers, ip)
			dirs[ip] = d
		}
		isolated := n.isolated[h.NS]
		n.mu.Unlock()
		sort.Strings(peers)
		var rules bytes.Buffer
		rules.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
		if isolated {
			rules.WriteString("-A INPUT -i eth0 -j DROP\n-A OUTPUT -o eth0 -j DROP\n")
		}
		for _, p := range peers {
			if dirs[p]&dropIn != 0 {
				// Not on loopback: nothing from a peer comes that way but
				// the answers of the run's link proxies to their client
				// (clusters/proxy), which carry the server's address once
				// their DNAT is undone, and must not be cut.
				fmt.Fprintf(&rules, "-A INPUT ! -i lo -s %s -j DROP\n", p)
			}
			if dirs[p]&dropOut != 0 {
				fmt.Fprintf(&rules, "-A OUTPUT -d %s -j DROP\n", p)
			}
		}
		rules.WriteString("COMMIT\n")
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.NS, "iptables-restore")
			cmd.Stdin = &rules
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("rules in %s (%s): %v: %s", h.NS, h.Name, err, strings.TrimSpace(string(out))))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close deletes every namespace of the run (processes inside must be gone).
func (n *Net) Close() error {
	var errs []error
	if n.sw == "" {
		// A joined Net: take the veth ends off the bridge at once (the
		// kernel removes them with their namespace, but 1-2 s later).
		for _, v := range n.vethRoot {
			_ = ip("link", "del", v)
		}
	}
	for _, h := range n.Hosts() {
		if err := ip("netns", "del", h.NS); err != nil {
			errs = append(errs, err)
		}
	}
	if n.sw == "" {
		return errors.Join(errs...)
	}
	if err := ip("netns", "del", n.sw); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Remove deletes named namespaces (cleanup of a crashed run).
func Remove(names []string) []error {
	var errs []error
	for _, name := range names {
		if err := ip("netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Join returns a Net with no switch namespace of its own, for a backend
// that brings its own network (the docker backend). Its hosts are either
// existing namespaces given a name (Attach: a container's), or fresh ones
// made by AddHost whose eth0 is a veth plugged into bridge, an existing
// bridge of the root namespace (the Docker network's), with the address
// ipAt(i) for the i-th such host. No route, address or firewall rule is
// added to the root namespace; the root side of each veth is a port of
// bridge, as a container's is.
func Join(id, bridge string, prefixLen int, ipAt func(i int) (string, error)) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	return &Net{id: id, blocks: map[string]map[string]dir{}, isolated: map[string]bool{}, bridge: bridge, plen: prefixLen, ipAt: ipAt}, nil
}

// addBridged is AddHost on a joined Net.
func (n *Net) addBridged(name string) (*Host, error) {
	n.mu.Lock()
	n.bridged++
	idx := n.bridged
	n.mu.Unlock()
	addr, err := n.ipAt(idx)
	if err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	h := &Host{Name: name, NS: fmt.Sprintf("%s-c%d", n.id, idx), IP: addr, idx: idx}
	veth, err := vethName(n.id, idx)
	if err != nil {
		return nil, fmt.Errorf("add host %s: %w", name, err)
	}
	steps := [][]string{
		{"netns", "add", h.NS},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{"link", "set", veth, "master", n.bridge},
		{"link", "set", veth, "up"},
		{"-n", h.NS, "addr", "add", fmt.Sprintf("%s/%d", addr, n.plen), "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			_ = ip("link", "del", veth)
			_ = ip("netns", "del", h.NS)
			return nil, fmt.Errorf("add host %s: %w", name, err)
		}
	}
	n.mu.Lock()
	n.hosts = append(n.hosts, h)
	n.vethRoot = append(n.vethRoot, veth)
	n.mu.Unlock()
	return h, nil
}

// vethName names the root end of the veth of the idx-th bridged host of run
// id: <id>c<idx>, whole (a name cut to the 15 characters an interface name
// may have would no longer start with the run's id, and cleanup could not
// find it). The harness's ids have at most 11 characters.
func vethName(id string, idx int) (string, error) {
	v := fmt.Sprintf("%sc%d", id, idx)
	if len(v) > 15 {
		return "", fmt.Errorf("interface name %s is longer than 15 characters (run id %s)", v, id)
	}
	return v, nil
}

// isLink reports whether name is the root end of a veth of run id: exactly
// <id>c<digits>. Run ids are "lt" and hex digits, and c is one: the digits
// after the last c tell the index, and no other run's name matches (run
// lt12's links are lt12c1, lt12c2...; lt12c1's are lt12c1c1...).
func isLink(id, name string) bool {
	rest, ok := strings.CutPrefix(name, id+"c")
	if !ok || rest == "" || id == "" {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Links lists the interfaces of the root namespace that a joined Net of run
// id made (the root ends of its client hosts' veths, plugged into a Docker
// network's bridge), by their names, and only those. They go with their
// namespaces, but the kernel may take minutes after a crash: cleanup
// deletes them by name (RemoveLinks).
func Links(id string) []string {
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if isLink(id, e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// RemoveLinks deletes the root ends of run id's veths (Links), which takes
// their other ends with them, and returns the names it deleted.
func RemoveLinks(id string) ([]string, []error) {
	var did []string
	var errs []error
	for _, l := range Links(id) {
		if err := ip("link", "del", l); err != nil {
			if _, serr := os.Stat("/sys/class/net/" + l); serr != nil {
				continue // gone meanwhile, with its namespace
			}
			errs = append(errs, err)
			continue
		}
		did = append(did, l)
	}
	return did, errs
}

// Attach names the network namespace of process pid (a container's) as a
// host of the run with address addr, so that Block and Heal reach inside
// it (`ip netns attach`; deleting the name later leaves the namespace to
// its process).
func (n *Net) Attach(name string, pid int, addr string) (*Host, error) {
	if err := notOurs(pid); err != nil {
		return nil, fmt.Errorf("attach %s: %w", name, err)
	}
	n.mu.Lock()
	n.attached++
	h := &Host{Name: name, NS: fmt.Sprintf("%s-s%d", n.id, n.attached), IP: addr}
	n.mu.Unlock()
	if err := ip("netns", "attach", h.NS, fmt.Sprint(pid)); err != nil {
		return nil, fmt.Errorf("attach %s: %w", name, err)
	}
	n.mu.Lock()
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	return h, nil
}

// notOurs refuses a process in the harness's own network namespace (the
// host's): the rules and routes written into an attached namespace must
// never land there.
func notOurs(pid int) error {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return err
	}
	if ns == self {
		return fmt.Errorf("process %d is in the harness's own network namespace (the host's): not attaching it", pid)
	}
	return nil
}

// Reattach points h's name at the namespace of pid (a restarted container
// gets a fresh namespace) and writes h's blocks and blackhole routes into it
// again.
func (n *Net) Reattach(ctx context.Context, h *Host, pid int) error {
	if err := notOurs(pid); err != nil {
		return fmt.Errorf("reattach %s: %w", h.Name, err)
	}
	_ = ip("netns", "del", h.NS)
	if err := ip("netns", "attach", h.NS, fmt.Sprint(pid)); err != nil {
		return fmt.Errorf("reattach %s: %w", h.Name, err)
	}
	n.mu.Lock()
	blocked := len(n.blocks[h.NS]) > 0 || n.isolated[h.NS]
	var routes []*Host
	for _, r := range n.routes {
		if r[0] == h {
			routes = append(routes, r[1])
		}
	}
	n.mu.Unlock()
	for _, to := range routes {
		if err := ip("-n", h.NS, "route", "replace", "blackhole", to.IP+"/32"); err != nil {
			return fmt.Errorf("reattach %s: %w", h.Name, err)
		}
	}
	if !blocked {
		return nil
	}
	return n.apply(ctx, map[*Host]bool{h: true})
}
