// Package docker runs the topologies as containers, through the Docker
// Engine API (DOCKER_HOST honoured), on a user-defined bridge network per
// run. Every container and network it creates is labelled with the run id
// (LabelRun), so `locktest cleanup` can remove what a crashed run left.
//
// Faults act on the containers: pause-server is `docker pause` (the cgroup
// freezer), kill is `docker kill` + `docker start` (the same address; a
// redis-server comes back empty, the others with their data), the clock fault shifts a libfaketime shim
// inside the container through a bind-mounted offset file, and partitions
// are DROP rules inside the containers' own network namespaces, reached from
// the host by naming them (`ip netns attach`); clients that partitions aim
// at get namespaces of their own plugged into the network's bridge. The
// root namespace's firewall is never touched.
//
// Every topology of the local backend runs here too (Topologies), with the
// same configs, readiness checks and failover steps (clusters/recipe).
package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/clusters/recipe"
)

// Labels on everything the backends create or recognise.
const (
	LabelRun      = "locktest.run"      // the run id (containers, networks)
	LabelTopology = "locktest.topology" // e.g. "redis5"
	LabelNode     = "locktest.node"     // e.g. "redis-3"
)

// Topology is one shape of servers the docker and compose backends run:
// the same topologies as the local backend.
type Topology struct {
	Name  string
	Nodes int    // servers (containers)
	Kind  string // the image kind its servers run
	// What it can do (clock shim, failover) is declared in
	// clusters.Topologies.
}

// Topologies lists the topologies of the docker and compose backends.
var Topologies = []Topology{
	{Name: "redis", Nodes: 1, Kind: KindRedis},
	{Name: "redis5", Nodes: 5, Kind: KindRedis},
	{Name: "redis-sentinel", Nodes: 6, Kind: KindRedis},
	{Name: "zk3", Nodes: 3, Kind: KindZooKeeper},
	{Name: "etcd3", Nodes: 3, Kind: KindEtcd},
	{Name: "mysql", Nodes: 1, Kind: KindMariaDB},
	{Name: "mysql-replicated", Nodes: 2, Kind: KindMariaDB},
}

// Lookup returns the topology named name.
func Lookup(name string) (Topology, bool) {
	for _, t := range Topologies {
		if t.Name == name {
			return t, true
		}
	}
	return Topology{}, false
}

// Supports reports whether topology runs on the docker backends.
func Supports(topology string) bool {
	_, ok := Lookup(topology)
	return ok
}

// Names lists the supported topologies.
func Names() []string {
	var out []string
	for _, t := range Topologies {
		out = append(out, t.Name)
	}
	return out
}

// Image kinds: one image per kind of server.
const (
	KindRedis     = "redis"     // redis-server, and redis-server --sentinel
	KindZooKeeper = "zookeeper" // ZooKeeper 3.8
	KindEtcd      = "etcd"      // etcd 3.4 or later
	KindMariaDB   = "mariadb"   // MariaDB 10.11
)

// Kinds lists the image kinds.
var Kinds = []string{KindRedis, KindZooKeeper, KindEtcd, KindMariaDB}

// DefaultImages are the official images a user would expect.
var DefaultImages = map[string]string{
	KindRedis:     "redis:7",
	KindZooKeeper: "zookeeper:3.8",
	KindEtcd:      "quay.io/coreos/etcd:v3.5.17",
	KindMariaDB:   "mariadb:10.11",
}

// DefaultRedisImage is the official redis image.
const DefaultRedisImage = "redis:7"

// LocalRedisImage is what scripts/build-images.sh builds for redis.
const LocalRedisImage = "locktest/redis:bookworm"

// LocalImage is the image scripts/build-images.sh builds for kind, from
// Debian's packages: locktest/<kind>:bookworm.
func LocalImage(kind string) string { return "locktest/" + kind + ":bookworm" }

// ImageEnv is the environment variable that overrides the image of kind.
func ImageEnv(kind string) string { return "LOCKTEST_IMAGE_" + strings.ToUpper(kind) }

// Image returns the image for kind: overrides[kind] (the --image flag),
// else $LOCKTEST_IMAGE_<KIND>, else the official image.
func Image(kind string, overrides map[string]string) string {
	if v := overrides[kind]; v != "" {
		return v
	}
	if v := os.Getenv(ImageEnv(kind)); v != "" {
		return v
	}
	return DefaultImages[kind]
}

// Connect opens an Engine API client from the environment (DOCKER_HOST,
// DOCKER_API_VERSION, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY) and checks that
// the engine answers.
func Connect(ctx context.Context) (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Ping(pctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("no Docker engine answers at %s: %w", c.DaemonHost(), err)
	}
	return c, nil
}

// Backend starts topologies as containers.
type Backend struct {
	// Images overrides the image per kind ("redis", "zookeeper", "etcd",
	// "mariadb"); see Image.
	Images map[string]string
}

// Name returns "docker".
func (Backend) Name() string { return string(clusters.Docker) }

// Start creates the run's network and the topology's containers, and
// returns once every server serves (and, for the replicated topologies,
// once they form the topology: a leader elected, replicas in sync).
// s.RunID labels them; s.NetID, when set, names the network namespaces
// partitions use.
func (b Backend) Start(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	t, ok := Lookup(s.Topology)
	if !ok {
		return nil, fmt.Errorf("docker backend: topology %q is not supported (supported: %s)", s.Topology, strings.Join(Names(), ", "))
	}
	if s.RunID == "" {
		return nil, errors.New("docker backend: the spec has no run id")
	}
	if info, _ := clusters.LookupTopology(s.Topology); s.ClockShim && !info.ClockShim {
		return nil, fmt.Errorf("the %s topology has no clock shim: clock faults need a Redis topology", s.Topology)
	}
	cli, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	img := Image(t.Kind, b.Images)
	if err := ensureImage(ctx, cli, t.Kind, b.Images); err != nil {
		cli.Close()
		return nil, err
	}
	c := &cluster{cli: cli, topology: s.Topology, runID: s.RunID, images: map[string]string{t.Kind: img}, owned: true}
	fail := func(err error) (clusters.Cluster, error) {
		_ = c.Stop(context.Background())
		return nil, err
	}
	if err := c.createNetwork(ctx); err != nil {
		return fail(err)
	}
	if err := c.plan(s); err != nil {
		return fail(err)
	}
	for _, n := range c.nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return fail(err)
		}
		if s.ClockShim && (n.role == roleRedis || n.role == roleMySQL) {
			if err := n.useClockShim(); err != nil {
				return fail(err)
			}
		}
	}
	// Create every container, then start them in waves (the Sentinels
	// after the data nodes are in sync, as on the local backend).
	if err := clusters.Each(c.nodes, func(n *node) error { return n.create(ctx) }); err != nil {
		return fail(err)
	}
	for wave := 0; wave < 2; wave++ {
		var ns []*node
		for _, n := range c.nodes {
			if n.wave == wave {
				ns = append(ns, n)
			}
		}
		if len(ns) == 0 {
			continue
		}
		if wave > 0 {
			if err := c.beforeWave(ctx); err != nil {
				return fail(err)
			}
		}
		if err := clusters.Each(ns, func(n *node) error { return n.startAndWait(ctx) }); err != nil {
			return fail(err)
		}
	}
	if s.NetID != "" {
		if err := c.joinNet(s.NetID); err != nil {
			return fail(err)
		}
	}
	out, err := c.form(ctx, s)
	if err != nil {
		return fail(err)
	}
	return out, nil
}

// ensureImage finds the image of kind locally or pulls it; a failed pull
// says what to do (see missingImage).
func ensureImage(ctx context.Context, cli *client.Client, kind string, overrides map[string]string) error {
	img := Image(kind, overrides)
	if _, err := cli.ImageInspect(ctx, img); err == nil {
		return nil
	}
	if img == LocalImage(kind) {
		// Built here, never pulled (no registry has it).
		return missingImage(kind, overrides, nil)
	}
	rc, err := cli.ImagePull(ctx, img, image.PullOptions{})
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if err != nil {
		return missingImage(kind, overrides, err)
	}
	return nil
}

// imageOrigin says who chose the image of kind: "--image KIND",
// "LOCKTEST_IMAGE_<KIND>", or "" for the default (the official image).
func imageOrigin(kind string, overrides map[string]string) string {
	if overrides[kind] != "" {
		return "--image " + kind
	}
	if os.Getenv(ImageEnv(kind)) != "" {
		return ImageEnv(kind)
	}
	return ""
}

// missingImage says that the image of kind is not here (pullErr: nor could
// it be pulled; nil when no pull was tried) and what to do: build the
// local image, when that is the one asked for or when the default (the
// official image) is missing; check the name, when the user named another
// image.
func missingImage(kind string, overrides map[string]string, pullErr error) error {
	img, origin := Image(kind, overrides), imageOrigin(kind, overrides)
	what := "is not here"
	if pullErr != nil {
		what = fmt.Sprintf("is not here and could not be pulled (%s)", firstLine(pullErr.Error()))
	}
	switch {
	case img == LocalImage(kind):
		return fmt.Errorf("image %s %s: build it with `sudo ./scripts/build-images.sh %s`", img, what, kind)
	case origin != "":
		return fmt.Errorf("image %s, given with %s, %s: check the name, or pull or load it into the engine (without %s the default is %s)", img, origin, what, origin, DefaultImages[kind])
	}
	return fmt.Errorf("image %s %s: build a local one with `sudo ./scripts/build-images.sh %s` and run with %s=%s (or --image %s=%s)",
		img, what, kind, ImageEnv(kind), LocalImage(kind), kind, LocalImage(kind))
}

// cluster is a started topology on docker.
type cluster struct {
	cli      *client.Client
	topology string
	runID    string
	images   map[string]string // kind -> image
	versions map[string]string // role -> server version, read once it serves
	owned    bool              // created by this run: Stop removes it (compose: false)
	moved    atomic.Bool       // a restarted server came back at another address

	netID   string // the Docker network's id
	bridge  string // its bridge device in the root namespace
	subnet  netip.Prefix
	nodes   []*node
	net     *netns.Net
	netName string
}

func (c *cluster) Topology() string { return c.topology }

func (c *cluster) Nodes() []clusters.Node {
	out := make([]clusters.Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n
	}
	return out
}

func (c *cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

func (c *cluster) Versions() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = fmt.Sprintf("%s: %s (image %s)", n.name, c.versions[n.role], n.image())
	}
	return out
}

// readVersions asks one server of each role for its version.
func (c *cluster) readVersions(ctx context.Context) {
	c.versions = map[string]string{}
	for _, n := range c.nodes {
		if _, ok := c.versions[n.role]; ok {
			continue
		}
		switch n.role {
		case roleZK:
			c.versions[n.role] = recipe.ZKVersion(dial, n.Addr())
		case roleEtcd:
			c.versions[n.role] = recipe.EtcdVersion(recipe.EtcdHTTP(dial), n.Addr())
		case roleMySQL:
			c.versions[n.role] = n.mysql.version(ctx)
		default:
			c.versions[n.role] = redisVersion(n.Addr())
		}
	}
}

// Net returns the run's network layer (partitions), nil without one.
func (c *cluster) Net() *netns.Net { return c.net }

// Stop saves each server's log into its directory, heals and removes the
// network namespaces, removes the containers (with their volumes) and the
// network. On a compose stack (not created by the run) it only heals: it
// resumes paused servers and starts killed ones, and removes nothing.
func (c *cluster) Stop(ctx context.Context) error {
	var errs []error
	if c.net != nil {
		errs = append(errs, c.net.Heal(ctx), c.net.Close())
		c.net = nil
	}
	nerrs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		if n.mysql != nil {
			n.mysql.close()
		}
		if n.id == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !c.owned {
				nerrs[i] = n.heal(ctx)
				return
			}
			n.saveLog(ctx)
			if err := c.cli.ContainerRemove(ctx, n.id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
				nerrs[i] = fmt.Errorf("remove %s: %w", n.name, err)
			}
		}()
	}
	wg.Wait()
	errs = append(errs, nerrs...)
	if c.owned && c.netID != "" {
		if err := c.cli.NetworkRemove(ctx, c.netID); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", c.netName, err))
		}
		c.netID = ""
	}
	c.cli.Close()
	return errors.Join(errs...)
}

// createNetwork creates the run's bridge network on a /22 that overlaps no
// Docker network and no route of the host, with a bridge device named
// after the run (so partitions know it).
func (c *cluster) createNetwork(ctx context.Context) error {
	c.netName = "locktest-" + c.runID
	c.bridge = bridgeName(c.runID)
	taken, err := takenPrefixes(ctx, c.cli)
	if err != nil {
		return err
	}
	var lastErr error
	tries := 0
	for _, p := range candidates(c.runID) {
		if overlapsAny(p, taken) {
			continue
		}
		if tries++; tries > 8 {
			break
		}
		gw := p.Addr().Next()
		resp, err := c.cli.NetworkCreate(ctx, c.netName, network.CreateOptions{
			Driver: "bridge",
			Labels: map[string]string{LabelRun: c.runID, LabelTopology: c.topology},
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: p.String(), Gateway: gw.String()}}},
			Options: map[string]string{
				"com.docker.network.bridge.name": c.bridge,
			},
		})
		if err != nil {
			lastErr = err
			continue
		}
		c.netID, c.subnet = resp.ID, p
		return nil
	}
	return fmt.Errorf("create network %s: no free /22 found in 172.28.0.0/14 (last error: %v)", c.netName, lastErr)
}

// serverIP is the fixed address of server i (1-based): .10+i.
func (c *cluster) serverIP(i int) string {
	a := c.subnet.Addr().As4()
	a[3] = byte(10 + i)
	return netip.AddrFrom4(a).String()
}

// clientIP is the address of the i-th client namespace (1-based), counted
// down from the top of the subnet, where Docker's allocator never reaches
// first.
func clientIP(p netip.Prefix, i int) (string, error) {
	a := p.Masked().Addr().As4()
	size := uint32(1) << (32 - p.Bits())
	base := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	if uint32(i) > size/2-2 {
		return "", fmt.Errorf("no address left for client %d in %s", i, p)
	}
	v := base + size - 1 - uint32(i) // below the broadcast address
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String(), nil
}

// joinNet names each container's namespace for partitions and readies
// client namespaces on the network's bridge.
func (c *cluster) joinNet(netID string) error {
	nw, err := netns.Join(netID, c.bridge, c.subnet.Bits(), func(i int) (string, error) { return clientIP(c.subnet, i) })
	if err != nil {
		return err
	}
	c.net = nw
	for _, n := range c.nodes {
		h, err := nw.Attach(n.name, n.PID(), n.ip)
		if err != nil {
			return err
		}
		n.host = h
	}
	return nil
}

// bridgeName names the run's bridge device: br-lt and 10 hex digits of a
// hash of the run id (an interface name has at most 15 characters, and
// the harness's run ids are longer: their first 12 characters are the same
// for runs a process starts within one second).
func bridgeName(runID string) string {
	var h uint64 = 14695981039346656037
	for _, ch := range runID {
		h = (h ^ uint64(ch)) * 1099511628211
	}
	return fmt.Sprintf("br-lt%010x", h&0xffffffffff)
}

// candidates lists the /22s of 172.28.0.0/14 (172.28-31), starting at a
// place drawn from the run id so that parallel runs rarely collide. A /22
// holds the servers (from .11) and up to 510 client namespaces (from the
// top down).
func candidates(runID string) []netip.Prefix {
	var h uint32 = 2166136261
	for _, ch := range runID {
		h = (h ^ uint32(ch)) * 16777619
	}
	const n = 4 * 64
	out := make([]netip.Prefix, 0, n)
	for k := 0; k < n; k++ {
		i := (int(h%n) + k) % n
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(28 + i/64), byte(i % 64 * 4), 0}), 22))
	}
	return out
}

// takenPrefixes returns the subnets of every Docker network and every IPv4
// route of the host.
func takenPrefixes(ctx context.Context, cli *client.Client) ([]netip.Prefix, error) {
	var out []netip.Prefix
	nets, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range nets {
		for _, cfg := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(cfg.Subnet); err == nil {
				out = append(out, p)
			}
		}
	}
	return append(out, hostRoutes()...), nil
}

// hostRoutes reads the IPv4 routes of the root namespace (not the default
// route).
func hostRoutes() []netip.Prefix {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Prefix
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 {
			continue
		}
		var dst, mask uint32
		if _, err := fmt.Sscanf(fs[1]+" "+fs[7], "%x %x", &dst, &mask); err != nil || mask == 0 {
			continue
		}
		// Little-endian hex in /proc/net/route.
		a := netip.AddrFrom4([4]byte{byte(dst), byte(dst >> 8), byte(dst >> 16), byte(dst >> 24)})
		bits := 0
		for m := mask; m != 0; m >>= 1 {
			bits += int(m & 1)
		}
		out = append(out, netip.PrefixFrom(a, bits))
	}
	return out
}

func overlapsAny(p netip.Prefix, taken []netip.Prefix) bool {
	return slices.ContainsFunc(taken, p.Overlaps)
}

// redisVersion asks a server for its version (INFO server).
func redisVersion(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "redis (version unknown)"
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return "redis (version unknown)"
	}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "redis (version unknown)"
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "redis " + v
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// runFilter selects what carries run id's label.
func runFilter(runID string) filters.Args {
	return filters.NewArgs(filters.Arg("label", LabelRun+"="+runID))
}

// demux writes a container log stream (stdout and stderr multiplexed) to w.
var demux = stdcopy.StdCopy

// Available says why the docker backend cannot run the image of kind here
// (no engine, no such image locally), or nil. It never pulls.
func Available(ctx context.Context, kind string, overrides map[string]string) error {
	cli, err := Connect(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, Image(kind, overrides)); err != nil {
		return missingImage(kind, overrides, nil)
	}
	return nil
}

// Engine is what `locktest doctor` says of the Docker engine: where it is,
// whether it answers, and which images of each kind it has.
type Engine struct {
	Host    string // the address the client uses (DOCKER_HOST, else the default socket)
	FromEnv bool   // DOCKER_HOST is set
	Version string // the engine's version, when it answers
	Err     error  // why it does not answer, nil when it does
	Images  []KindImages
}

// KindImages says which images of a kind of server the engine has.
type KindImages struct {
	Kind                      string
	Local, Official, Uses     string // locktest/<kind>:bookworm, the default, what runs take now
	HasLocal, HasOfficial, OK bool   // OK: Uses is there
}

// Survey asks the engine of the environment (DOCKER_HOST...) for its
// version and for the local, official and chosen image of every kind. It
// never pulls.
func Survey(ctx context.Context) Engine {
	e := Engine{FromEnv: os.Getenv("DOCKER_HOST") != ""}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		e.Err = err
		return e
	}
	defer cli.Close()
	e.Host = cli.DaemonHost()
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := cli.ServerVersion(vctx)
	if err != nil {
		e.Err = err
		return e
	}
	e.Version = v.Version
	has := func(img string) bool {
		_, err := cli.ImageInspect(ctx, img)
		return err == nil
	}
	for _, k := range Kinds {
		ki := KindImages{Kind: k, Local: LocalImage(k), Official: DefaultImages[k], Uses: Image(k, nil)}
		ki.HasLocal, ki.HasOfficial = has(ki.Local), has(ki.Official)
		switch ki.Uses {
		case ki.Local:
			ki.OK = ki.HasLocal
		case ki.Official:
			ki.OK = ki.HasOfficial
		default:
			ki.OK = has(ki.Uses)
		}
		e.Images = append(e.Images, ki)
	}
	return e
}
