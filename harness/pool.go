package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/nemesis"
)

// Pool keeps started clusters of the local backend for the runs of a
// campaign, so that runs whose servers would be started the same way
// (PoolKey) run on one cluster, one after the other, instead of each
// starting its own. A cluster is used by one run at a time: a run takes it
// out of the pool and gives it back when it ends.
//
// State between runs is kept apart without resetting the servers: a pooled
// run's clients get a lock key of their own (every scheme derives all of its
// server state from the key), every client of the run has exited before
// the run gives the cluster back, partitions are healed and the run's
// client namespaces removed. A cluster goes back into the pool only after a
// run that ended normally and whose faults cannot have changed its shape
// (see reusable), and it is used again only after a health check (every
// server process runs and is not stopped, answers its own protocol, clock
// shims back at +0, Sentinel still names the first master); otherwise it
// is stopped and the next run starts a fresh one.
//
// A pooled cluster lives in its own directory, Dir/<name>/ (servers/ holds
// the logs; every run on it links its own servers/ there), has its own
// runstate record (so `locktest cleanup` removes it after a kill -9 of the
// campaign) and its own network namespaces when it was started for
// partitions.
type Pool struct {
	dir string

	mu     sync.Mutex
	idle   []*pooled
	seq    int
	closed bool
	stats  PoolStats
}

// PoolStats counts what a pool did.
type PoolStats struct {
	Starts  int           // clusters started
	Reuses  int           // runs on an already started cluster: starts saved
	Retired int           // clusters stopped after a run instead of being kept (unhealthy, or a fault that may change their shape)
	Startup time.Duration // spent starting clusters
	Checks  time.Duration // spent in health checks before reuse
}

// pooled is one started cluster of a pool.
type pooled struct {
	key, name, dir, id string
	cl                 clusters.Cluster
	net                *netns.Net
	tracker            *runstate.Tracker
	runs               int // runs that used it
}

// NewPool returns a pool whose clusters live under dir.
func NewPool(dir string) *Pool {
	// Absolute: the servers' paths must not depend on their working
	// directory (see Run).
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Pool{dir: dir}
}

// Stats returns what the pool has done so far.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// clientFaults only touch client processes: after them a replicated
// topology still has the primary it started with.
var clientFaults = []string{"none", "pause", "crash-client", "clock-client"}

// PoolKey says which runs may share a cluster: those whose servers are
// started alike (topology, clock shim, network namespaces, the server
// --param settings). It is "" for a run that starts its own cluster: the
// container backends, a --client-cmd run (the user's program may keep state
// outside the key), a run with the failover fault (it changes the primary),
// and options that do not validate.
func PoolKey(o Options) string {
	s, ok := locks.Lookup(o.Lock)
	if !ok || o.Cluster != string(clusters.Local) || o.ClientCmd != "" {
		return ""
	}
	ns, _, err := nemesis.Parse(o.Nemesis)
	if err != nil || needsFailover(ns) {
		return ""
	}
	topology := o.topologyOf(s)
	key := topology
	if needsClockShim(ns) {
		key += "+clock"
	}
	if nemesis.NeedsNet(ns, o.Params) {
		key += "+net"
	}
	var set []string
	for _, prm := range local.Params {
		if v, ok := o.Params[prm.Name]; ok && slices.Contains(strings.Split(strings.ReplaceAll(prm.For, " ", ""), ","), topology) {
			set = append(set, prm.Name+"="+v)
		}
	}
	slices.Sort(set)
	if len(set) > 0 {
		key += "{" + strings.Join(set, ",") + "}"
	}
	return key
}

// reusable says whether a cluster may serve another run after a normal
// run with faults names on topology: a fault that only touched clients
// always; on a topology that fails over, no server fault (a kill, pause or
// partition of the primary can make Sentinel or an operator promote a
// replica, and a shifted clock on a replication pair is not worth the
// doubt).
func reusable(topology string, names []string) bool {
	if !local.FailsOver(topology) {
		return true
	}
	for _, n := range names {
		if !slices.Contains(clientFaults, n) {
			return false
		}
	}
	return true
}

// covers says whether the run of o takes its cluster from p.
func (p *Pool) covers(o Options) bool { return p != nil && PoolKey(o) != "" }

// backend is what harness.Run starts its cluster with when p covers it.
func (p *Pool) backend(o Options, names []string) clusters.Backend {
	s, _ := locks.Lookup(o.Lock)
	ns, _, _ := nemesis.Parse(o.Nemesis)
	return poolBackend{p: p, key: PoolKey(o), net: nemesis.NeedsNet(ns, o.Params), reuse: reusable(o.topologyOf(s), names)}
}

type poolBackend struct {
	p     *Pool
	key   string
	net   bool
	reuse bool
}

func (b poolBackend) Name() string { return string(clusters.Local) }

// Start hands the run a healthy cluster of its key, started now or kept
// from an earlier run.
func (b poolBackend) Start(ctx context.Context, s clusters.Spec) (clusters.Cluster, error) {
	e, reused, err := b.p.take(ctx, b.key, b.net, s)
	if err != nil {
		return nil, err
	}
	pc := &poolCluster{Cluster: e.cl, p: b.p, e: e, reuse: b.reuse, reused: reused, runID: s.RunID}
	if e.net != nil {
		pc.before = e.net.Hosts()
	}
	if err := pc.record(s.Dir); err != nil {
		_ = pc.Stop(context.Background())
		return nil, err
	}
	if l, ok := e.cl.(clusters.Leader); ok {
		return &poolLeader{pc, l}, nil
	}
	return pc, nil
}

// take returns an idle healthy cluster of key, or starts one.
func (p *Pool) take(ctx context.Context, key string, withNet bool, s clusters.Spec) (*pooled, bool, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, false, errors.New("cluster pool closed")
		}
		i := slices.IndexFunc(p.idle, func(e *pooled) bool { return e.key == key })
		if i < 0 {
			p.mu.Unlock()
			break
		}
		e := p.idle[i]
		p.idle = slices.Delete(p.idle, i, i+1)
		p.mu.Unlock()
		t0 := time.Now()
		err := Healthy(ctx, e.cl)
		p.mu.Lock()
		p.stats.Checks += time.Since(t0)
		if err == nil {
			p.stats.Reuses++
		} else {
			p.stats.Retired++
		}
		p.mu.Unlock()
		if err == nil {
			e.runs++
			return e, true, nil
		}
		e.log("not reused: %v", err)
		e.stop()
	}
	e, err := p.start(ctx, key, withNet, s)
	if err != nil {
		return nil, false, err
	}
	e.runs++
	return e, false, nil
}

// start starts a cluster for key in its own directory, with its own
// runstate record and, for partitions, its own network.
func (p *Pool) start(ctx context.Context, key string, withNet bool, s clusters.Spec) (*pooled, error) {
	t0 := time.Now()
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	var e *pooled
	for {
		p.mu.Lock()
		p.seq++
		seq := p.seq
		p.mu.Unlock()
		name := fmt.Sprintf("%s-%d", strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
				return r
			}
			return '_'
		}, key), seq)
		// Like a run id, and apart from every run's ("lt" + digits).
		id := fmt.Sprintf("%sp%x%03x%02x", netns.Prefix, t0.UnixNano()%0xffffff, os.Getpid()%0xfff, seq&0xff)
		e = &pooled{key: key, name: name, dir: filepath.Join(p.dir, name), id: id}
		// A new directory: a resumed campaign's earlier clusters keep theirs.
		err := os.Mkdir(e.dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
	}
	id := e.id
	tracker, err := runstate.Open(id, e.dir)
	if err != nil {
		return nil, err
	}
	e.tracker = tracker
	if withNet {
		tracker.SetNet(id)
		if e.net, err = netns.New(id); err != nil {
			_ = tracker.Close()
			return nil, err
		}
	}
	spec := clusters.Spec{Topology: s.Topology, Dir: e.dir, Tracker: tracker, Params: s.Params, Net: e.net, ClockShim: s.ClockShim, RunID: id}
	if e.cl, err = (local.Backend{}).Start(ctx, spec); err != nil {
		e.stop()
		return nil, err
	}
	p.mu.Lock()
	p.stats.Starts++
	p.stats.Startup += time.Since(t0)
	p.mu.Unlock()
	e.log("started %s in %s", key, time.Since(t0).Round(time.Millisecond))
	return e, nil
}

// put gives a cluster back after a run: kept for the next run of its key,
// or stopped.
func (p *Pool) put(e *pooled, keep bool) {
	p.mu.Lock()
	if keep && !p.closed {
		p.idle = append(p.idle, e)
		p.mu.Unlock()
		return
	}
	if !keep {
		p.stats.Retired++
	}
	p.mu.Unlock()
	e.stop()
}

// Drop stops the idle clusters of key (no run needs them any more).
func (p *Pool) Drop(key string) {
	p.mu.Lock()
	var drop []*pooled
	p.idle = slices.DeleteFunc(p.idle, func(e *pooled) bool {
		if e.key == key {
			drop = append(drop, e)
			return true
		}
		return false
	})
	p.mu.Unlock()
	for _, e := range drop {
		e.stop()
	}
}

// Close stops every idle cluster; a cluster in use is stopped when its run
// gives it back.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, e := range idle {
		e.stop()
	}
}

// stop stops the cluster's servers, removes its namespaces and forgets its
// runstate record.
func (e *pooled) stop() {
	if e.cl != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_ = e.cl.Stop(sctx)
		cancel()
	}
	if e.net != nil {
		_ = e.net.Heal(context.Background())
		_ = e.net.Close()
	}
	_ = e.tracker.Close()
	e.log("stopped after %d runs", e.runs)
}

// log appends a line to the cluster's pool.log: what it went through.
func (e *pooled) log(format string, a ...any) {
	f, err := os.OpenFile(filepath.Join(e.dir, "pool.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	f.Close()
}

// poolCluster is a pooled cluster as one run sees it: Stop gives it back.
type poolCluster struct {
	clusters.Cluster
	p      *Pool
	e      *pooled
	runID  string
	reuse  bool          // the run's faults leave the cluster's shape alone
	reused bool          // the run got a cluster an earlier run used
	ok     bool          // the run ended normally (keep)
	before []*netns.Host // the network's hosts before the run: its servers
	once   sync.Once
}

// poolLeader is a poolCluster of a topology with a leader (zk3, etcd3).
type poolLeader struct {
	*poolCluster
	l clusters.Leader
}

func (c *poolLeader) Leader(ctx context.Context) (clusters.Node, error) { return c.l.Leader(ctx) }

// ServerGroups forwards the pooled cluster's server groups
// (clusters.Grouped: the partition fault splits each on its own); one
// group when it has none.
func (c *poolCluster) ServerGroups() [][]clusters.Node {
	if g, ok := c.Cluster.(clusters.Grouped); ok {
		return g.ServerGroups()
	}
	return [][]clusters.Node{c.Nodes()}
}

// Net is the pooled cluster's network, which outlives the run.
func (c *poolCluster) Net() *netns.Net { return c.e.net }

// Stop gives the cluster back: the run's partitions healed and its client
// namespaces removed (its clients have exited), then kept or stopped.
func (c *poolCluster) Stop(ctx context.Context) error {
	c.once.Do(func() {
		keep := c.ok && c.reuse
		if n := c.e.net; n != nil {
			if err := n.Heal(ctx); err != nil {
				keep = false
			}
			for _, h := range n.Hosts() {
				if !slices.Contains(c.before, h) {
					if err := n.RemoveHost(h); err != nil {
						keep = false
					}
				}
			}
		}
		c.e.log("run %s ended (kept: %v)", c.runID, keep)
		c.p.put(c.e, keep)
	})
	return nil
}

// record links the run directory's servers/ to the pooled cluster's (the
// run page links the server logs there) and writes into config.json which
// cluster the run used.
func (c *poolCluster) record(runDir string) error {
	c.e.log("run %s in %s (run %d on this cluster)", c.runID, runDir, c.e.runs)
	absRun, err := filepath.Abs(runDir)
	if err != nil {
		return err
	}
	absServers, err := filepath.Abs(filepath.Join(c.e.dir, "servers"))
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(absRun, absServers)
	if err != nil {
		return err
	}
	if err := os.Symlink(rel, filepath.Join(runDir, "servers")); err != nil {
		return err
	}
	cfgPath := filepath.Join(runDir, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return err
	}
	relDir, _ := filepath.Rel(absRun, filepath.Dir(absServers))
	var pids []int
	for _, n := range c.Nodes() {
		pids = append(pids, n.PID())
	}
	cfg["pooled_cluster"] = PooledCluster{Name: c.e.name, ID: c.e.id, Key: c.e.key, Dir: filepath.ToSlash(relDir), Reused: c.reused, Run: c.e.runs, PIDs: pids}
	return writeJSON(cfgPath, cfg)
}

// PooledCluster is what a run's config.json says of the pooled cluster it
// ran on ("pooled_cluster").
type PooledCluster struct {
	Name   string `json:"name"`
	ID     string `json:"id"` // its runstate record's, and its network namespaces' prefix
	Key    string `json:"key"`
	Dir    string `json:"dir"`    // relative to the run directory
	Reused bool   `json:"reused"` // started for an earlier run
	Run    int    `json:"run"`    // the how-manieth run on it
	PIDs   []int  `json:"pids"`   // the servers' pids when the run began
}

// poolOf returns the pooled cluster behind cl, nil when cl is a run's own.
func poolOf(cl clusters.Cluster) *poolCluster {
	switch c := cl.(type) {
	case *poolCluster:
		return c
	case *poolLeader:
		return c.poolCluster
	}
	return nil
}

// lockKey is the lock's name for the run's clients: the same for every run
// on a cluster of its own, one of the run's own on a pooled cluster.
func lockKey(cl clusters.Cluster, runID string) string {
	if poolOf(cl) != nil {
		return "locktest:lock:" + runID
	}
	return "locktest:lock"
}

// keepCluster marks a pooled cluster as fit to go back into its pool once
// the run gives it back (a run that ended normally).
func keepCluster(cl clusters.Cluster) {
	if c := poolOf(cl); c != nil {
		c.ok = true
	}
}

// pooledRun says which pooled cluster a run used and whether it was started
// for an earlier run ("", false: the run's own cluster).
func pooledRun(cl clusters.Cluster) (dir string, reused bool) {
	c := poolOf(cl)
	if c == nil {
		return "", false
	}
	return c.e.dir, c.reused
}

// Healthy checks a started cluster before another run uses it: every
// node and the cluster itself pass their probe (clusters.Prober: every
// server process runs and is not stopped and answers its own protocol; a
// Sentinel topology's Sentinels still name the first master), and clock
// shims are set back to +0.
func Healthy(ctx context.Context, cl clusters.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := clusters.Each(cl.Nodes(), func(n clusters.Node) error { return nodeHealthy(ctx, n) }); err != nil {
		return err
	}
	if p, ok := cl.(clusters.Prober); ok {
		return p.Probe(ctx)
	}
	return nil
}

func nodeHealthy(ctx context.Context, n clusters.Node) error {
	p, ok := n.(clusters.Prober)
	if !ok {
		return fmt.Errorf("%s has no health probe", n.Name())
	}
	if err := p.Probe(ctx); err != nil {
		return err
	}
	if cs, ok := n.(clusters.ClockShifter); ok {
		if err := cs.ShiftClock(0); err != nil && !errors.Is(err, clusters.ErrNoClockShim) {
			return fmt.Errorf("%s: clock back to +0: %w", n.Name(), err)
		}
	}
	return nil
}
