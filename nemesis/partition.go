package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/workloads"
)

// PartitionShapes are the partitions the partition nemesis draws from.
var PartitionShapes = []string{
	"isolate-holder",  // the client that just acquired, cut from every server
	"lost-reply",      // as a client sends an acquire, the servers' answers to it are dropped until healed
	"holder-minority", // that client cut from a minority of the servers
	"isolate-server",  // one server cut from everything
	"isolate-leader",  // the current leader (zk3, etcd3) cut from everything
	"split",           // servers and clients in two halves, servers split majority/minority
	"bridge",          // two halves of the servers that share one node
}

// ParseShapes reads the partition param ("" means every shape).
func ParseShapes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return PartitionShapes, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(PartitionShapes, f) {
			return nil, fmt.Errorf("unknown partition shape %q (known: %s)", f, strings.Join(PartitionShapes, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

type partition struct{}

func (*partition) Name() string   { return "partition" }
func (*partition) NeedsNet() bool { return true }

// Run alternates between healthy periods and partitions. Shapes aimed at
// the holder strike right after an acquire; the others at a random time.
func (*partition) Run(ctx context.Context, env *Env) error {
	if env.Net == nil {
		return errors.New("the run has no network layer")
	}
	shapes, err := ParseShapes(env.Params["partition"])
	if err != nil {
		return err
	}
	r := rng(env, "partition")
	groups, addrs := serverGroups(env.Cluster)
	var servers []*netns.Host
	for _, g := range groups {
		servers = append(servers, g...)
	}
	if len(servers) == 0 {
		return errors.New("no server has a network namespace")
	}

	var mu sync.Mutex
	active := false
	closed := false
	var wg sync.WaitGroup
	// A partition that did not take effect (a connection went through it)
	// ends the run: every later one would prove nothing either.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var fatal error
	// check probes a partition that just went in (stillConnected) and,
	// when a connection still goes through, says so and stops the run.
	check := func(pairs [][2]*netns.Host, d time.Duration) error {
		if err := stillConnected(pairs, addrs, min(probeTimeout, d/3)); err != nil {
			mu.Lock()
			if fatal == nil {
				fatal = err
				stop()
			}
			mu.Unlock()
			return err
		}
		return nil
	}
	// done frees the partition slot claim reserved.
	done := func() {
		mu.Lock()
		active = false
		mu.Unlock()
		wg.Done()
	}
	// hold, in the background, probes the partition that just went in
	// (pairs), keeps it d in all, heals it and ends its fault.
	hold := func(end func(string), pairs [][2]*netns.Host, d time.Duration) {
		go func() {
			defer done()
			t0 := time.Now()
			perr := check(pairs, d)
			if perr == nil {
				sleep.For(ctx, d-time.Since(t0)) // (the probe's time included)
			}
			herr := env.Net.Heal(context.Background())
			detail := "healed"
			switch {
			case perr != nil:
				// A partition that cut nothing did not strike (the
				// checker reads "failed").
				detail = "failed: " + perr.Error()
			case herr != nil:
				detail = "heal failed: " + herr.Error()
			}
			end(detail)
		}()
	}
	// begin applies pairs, then heals them after d, in the background.
	begin := func(shape, target string, client int, pairs [][2]*netns.Host, d time.Duration) {
		// Recorded first: rules take effect while Block runs.
		end := fault(env, "partition", target, client, fmt.Sprintf("%s for %s", shape, d.Round(time.Millisecond)))
		if err := env.Net.Block(context.Background(), pairs); err != nil {
			end("failed: " + err.Error())
			done()
			return
		}
		hold(end, pairs, d)
	}
	// claim reserves the next partition slot; false when one is active or
	// the run is ending.
	claim := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if active || closed || fatal != nil {
			return false
		}
		active = true
		wg.Add(1)
		return true
	}

	leader, hasLeader := env.Cluster.(clusters.Leader)
	var holderShapes, timedShapes []string
	for _, s := range shapes {
		if s == "isolate-leader" && !hasLeader {
			if len(shapes) == 1 {
				return fmt.Errorf("partition isolate-leader: topology %s elects no leader", env.Cluster.Topology())
			}
			continue // drawn from every shape: not for this topology
		}
		if s == "isolate-holder" || s == "holder-minority" {
			holderShapes = append(holderShapes, s)
		} else if s == "lost-reply" {
			continue
		} else {
			timedShapes = append(timedShapes, s)
		}
	}
	// Every draw from r happens under mu once the first hook is in place.
	nextHolder := time.Now().Add(between(r, 500*time.Millisecond, time.Second))
	nextReply := time.Now().Add(between(r, 500*time.Millisecond, time.Second))
	if len(holderShapes) > 0 {
		env.Workload.OnAcquire(func(p *workloads.Process) {
			mu.Lock()
			due := time.Now().After(nextHolder) && p.Host != nil
			var shape string
			var d time.Duration
			var cut []*netns.Host
			if due {
				shape = holderShapes[r.IntN(len(holderShapes))]
				d = scaled(r, env.TTL, 1.5, 3)
				cut = servers
				if shape == "holder-minority" {
					cut = minority(r, groups)
				}
				nextHolder = time.Now().Add(d + scaled(r, env.TTL, 1, 2))
			}
			mu.Unlock()
			if !due || len(cut) == 0 || !claim() {
				return
			}
			var pairs [][2]*netns.Host
			for _, s := range cut {
				pairs = append(pairs, [2]*netns.Host{p.Host, s})
			}
			begin(shape, fmt.Sprintf("client %d | %s", p.ID, names(cut)), p.ID, pairs, d)
		})
	}
	if slices.Contains(shapes, "lost-reply") {
		env.Workload.OnInvoke(func(p *workloads.Process, op history.Op) {
			// Aim at an acquire that can succeed: nobody holds the lock.
			if op != history.Acquire || p.Host == nil || env.Workload.Holders() > 0 {
				return
			}
			mu.Lock()
			due := time.Now().After(nextReply)
			var d time.Duration
			if due {
				d = scaled(r, env.TTL, 1.5, 3)
				nextReply = time.Now().Add(d + scaled(r, env.TTL, 1, 2))
			}
			mu.Unlock()
			if !due || !claim() {
				return
			}
			err := func() error {
				for _, s := range servers {
					if err := env.Net.BlockOneWay(context.Background(), s, p.Host); err != nil {
						return err
					}
				}
				return nil
			}()
			if err == nil && env.Workload.Holders() > 0 {
				// Somebody took the lock while the rules went in: this
				// acquire cannot succeed. Stand down and try another.
				_ = env.Net.Heal(context.Background())
				mu.Lock()
				nextReply = time.Now()
				mu.Unlock()
				done()
				return
			}
			end := fault(env, "partition", fmt.Sprintf("%s -> client %d", names(servers), p.ID), p.ID, fmt.Sprintf("lost-reply for %s", d.Round(time.Millisecond)))
			if err != nil {
				// (Once: the fault ends here.)
				_ = env.Net.Heal(context.Background())
				end("failed: " + err.Error())
				done()
				return
			}
			// (The probe's SYN goes through, the answer must not.)
			var pairs [][2]*netns.Host
			for _, s := range servers {
				pairs = append(pairs, [2]*netns.Host{p.Host, s})
			}
			hold(end, pairs, d)
		})
	}
	// r is shared with the OnAcquire and OnInvoke callbacks: draw under mu.
	nextWait := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return between(r, time.Second, 3*time.Second)
	}
	for len(timedShapes) > 0 && sleep.For(ctx, nextWait()) {
		mu.Lock()
		shape := timedShapes[r.IntN(len(timedShapes))]
		d := scaled(r, env.TTL, 1.5, 3)
		var clients []*netns.Host
		for _, p := range env.Workload.Processes() {
			if p.Host != nil {
				clients = append(clients, p.Host)
			}
		}
		slices.SortFunc(clients, func(a, b *netns.Host) int { return strings.Compare(a.Name, b.Name) })
		a, b := groupedSides(r, shape, groups, clients)
		mu.Unlock()
		if shape == "isolate-leader" {
			a, b = leaderSides(ctx, leader, servers, clients)
		}
		if len(a) == 0 || len(b) == 0 || !claim() {
			continue
		}
		target := names(a) + " | " + names(b)
		if shape == "bridge" {
			// The node on neither side stays connected to both.
			for _, s := range servers {
				if !slices.Contains(a, s) && !slices.Contains(b, s) {
					target += " (" + s.Name + " bridges them)"
				}
			}
		}
		begin(shape, target, 0, cross(a, b), d)
		// Wait for this partition to heal before drawing the next one.
		for {
			mu.Lock()
			busy := active
			mu.Unlock()
			if !busy || !sleep.For(ctx, 50*time.Millisecond) {
				break
			}
		}
	}
	<-ctx.Done()
	mu.Lock()
	closed = true
	mu.Unlock()
	wg.Wait()
	return fatal
}

// probeTimeout bounds a probe of a partition: a connection a partition
// drops times out (its SYN, or the answer, is dropped).
const probeTimeout = 300 * time.Millisecond

// ErrPartitionNoEffect: a connection went through a partition that had
// just gone in.
var ErrPartitionNoEffect = errors.New("the partition did not take effect")

// stillConnected probes a partition that has just gone in: from one end of
// a cut pair, a TCP connection to the other end, a server listening at
// addrs, must fail. Up to two pairs, in the order given; an error names the
// first pair whose connection went through. Pairs without a server end are
// not probed (nothing listens).
func stillConnected(pairs [][2]*netns.Host, addrs map[*netns.Host]string, timeout time.Duration) error {
	probed := 0
	for _, p := range pairs {
		from, to := p[0], p[1]
		addr, ok := addrs[to]
		if !ok {
			from, to = to, from
			if addr, ok = addrs[to]; !ok {
				continue
			}
		}
		c, err := from.Dial(addr, timeout)
		if err == nil {
			_ = c.Close()
			return fmt.Errorf("%w: %s still connected to %s (%s)", ErrPartitionNoEffect, from.Name, to.Name, addr)
		}
		// A connection refused (a reset came back) or timed out: cut, or
		// the server down at that moment (a restart racing the rules):
		// no alarm either way. Not entering the namespace (not a dial
		// error) is no probe.
		if _, dialed := errors.AsType[*net.OpError](err); !dialed {
			continue
		}
		if probed++; probed == 2 {
			break
		}
	}
	return nil
}

// serverGroups returns the namespaces of the cluster's servers, by group
// (clusters.Grouped; one group for a topology whose servers are all
// alike), and the address each one's clients use (what a probe dials).
//
// Every server counts, Sentinels included: a Sentinel is a server process
// of the topology, and cutting it is a fault of its own (an isolated
// Sentinel must not promote anything alone; a client cut from the
// Sentinels cannot find the master after a failover). The groups matter to
// the shapes that cut the servers in parts, so that each part is a
// plausible piece of the topology rather than, say, all three Sentinels on
// one side and every data node on the other:
//   - split halves each group on its own: on redis-sentinel one data node
//     and one Sentinel against two and two. The majority side has a
//     majority of the Sentinels (2 of 3, the quorum), so when the master
//     falls on the minority side the majority side can promote a replica
//     while clients on the minority side still write to the old master:
//     Sentinel's split brain.
//   - bridge puts one member of each group (of 3 or more) on both sides:
//     a data node and a Sentinel that see everyone.
//   - holder-minority cuts the holder from a minority of each group (a
//     data node, which may be the master, and a Sentinel).
//   - isolate-server, isolate-holder and lost-reply take the servers as
//     one list: one server of any kind, or all of them.
func serverGroups(cl clusters.Cluster) (groups [][]*netns.Host, addrs map[*netns.Host]string) {
	nodes := [][]clusters.Node{cl.Nodes()}
	if g, ok := cl.(clusters.Grouped); ok {
		nodes = g.ServerGroups()
	}
	addrs = map[*netns.Host]string{}
	for _, g := range nodes {
		var hs []*netns.Host
		for _, n := range g {
			if h, ok := n.(clusters.Hosted); ok && h.Host() != nil {
				hs = append(hs, h.Host())
				addrs[h.Host()] = n.Addr()
			}
		}
		if len(hs) > 0 {
			groups = append(groups, hs)
		}
	}
	return groups, addrs
}

// minority picks a minority of each group: what holder-minority cuts the
// holder from.
func minority(r *rand.Rand, groups [][]*netns.Host) []*netns.Host {
	var out []*netns.Host
	for _, g := range groups {
		out = append(out, pick(r, g, (len(g)-1)/2)...)
	}
	return out
}

// shapeSides returns the two sides of a timed shape over servers of one
// group (see groupedSides).
func shapeSides(r *rand.Rand, shape string, servers, clients []*netns.Host) (a, b []*netns.Host) {
	return groupedSides(r, shape, [][]*netns.Host{servers}, clients)
}

// groupedSides returns the two sides of a timed shape. split and bridge cut
// each group of servers on its own (see serverGroups); with one group they
// draw exactly what they drew before groups existed. For "bridge" the
// shared nodes are on neither list: they are cut from nobody.
func groupedSides(r *rand.Rand, shape string, groups [][]*netns.Host, clients []*netns.Host) (a, b []*netns.Host) {
	if shape == "isolate-server" {
		var servers []*netns.Host
		for _, g := range groups {
			servers = append(servers, g...)
		}
		ss := shuffled(r, servers)
		a = slices.Clone(ss[:1])
		b = append(append([]*netns.Host(nil), ss[1:]...), clients...)
		return a, b
	}
	if shape != "split" && shape != "bridge" {
		// isolate-leader: its sides come from the leader. The draw the
		// shape has always made is kept, so that seeded schedules stay.
		var servers []*netns.Host
		for _, g := range groups {
			servers = append(servers, g...)
		}
		shuffled(r, servers)
		return nil, nil
	}
	for _, g := range groups {
		ss := shuffled(r, g)
		switch shape {
		case "split":
			half := len(ss) / 2
			// Appended, copied: adding clients to a must not overwrite
			// b's servers (a and b would share ss's array).
			a, b = append(a, ss[:half]...), append(b, ss[half:]...)
		case "bridge":
			if len(ss) < 3 {
				return nil, nil
			}
			mid := len(ss) / 2
			// ss[mid] is the bridge: it stays connected to both halves.
			a, b = append(a, ss[:mid]...), append(b, ss[mid+1:]...)
		}
	}
	for _, c := range shuffled(r, clients) {
		if r.IntN(2) == 0 {
			a = append(a, c)
		} else {
			b = append(b, c)
		}
	}
	return a, b
}

// leaderSides cuts the current leader from every other server and every
// client; nothing when the leader cannot be found (an election under way).
func leaderSides(ctx context.Context, l clusters.Leader, servers, clients []*netns.Host) (a, b []*netns.Host) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := l.Leader(lctx)
	if err != nil {
		return nil, nil
	}
	h, ok := n.(clusters.Hosted)
	if !ok || h.Host() == nil {
		return nil, nil
	}
	for _, s := range servers {
		if s != h.Host() {
			b = append(b, s)
		}
	}
	return []*netns.Host{h.Host()}, append(b, clients...)
}

func cross(a, b []*netns.Host) [][2]*netns.Host {
	var out [][2]*netns.Host
	for _, x := range a {
		for _, y := range b {
			out = append(out, [2]*netns.Host{x, y})
		}
	}
	return out
}

func shuffled(r *rand.Rand, hs []*netns.Host) []*netns.Host {
	out := append([]*netns.Host(nil), hs...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func pick(r *rand.Rand, hs []*netns.Host, n int) []*netns.Host {
	return shuffled(r, hs)[:n]
}

func names(hs []*netns.Host) string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return strings.Join(out, ",")
}
