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

// OptInShapes are shapes drawn only when named in the partition param.
var OptInShapes = []string{
	"lost-renewal", // right after a grant, the servers' answers to the holder are dropped for 0.85-0.95 TTL: its lease renewals (a watchdog's) get no reply, though the servers apply them
}

// ParseShapes reads the partition param ("" means every shape but the
// opt-in ones).
func ParseShapes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return PartitionShapes, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(PartitionShapes, f) && !slices.Contains(OptInShapes, f) {
			return nil, fmt.Errorf("unknown partition shape %q (known: %s)", f, strings.Join(append(slices.Clone(PartitionShapes), OptInShapes...), ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

type partition struct{}

func (*partition) Name() string { return "partition" }

// Run alternates between healthy periods and partitions. Shapes aimed at
// the holder strike right after an acquire; the others at a random time.
func (*partition) Run(ctx context.Context, env *Env) error {
	if env.Net == nil {
		return errors.New("the run has no network layer")
	}
	// Aimed: on a topology with a master that Sentinels elect, without
	// --param partition, the one shape that can hurt: a split with the
	// master on the minority side and clients on both.
	shapes := env.Settings.Partition
	master, aimed := clusters.As[mastered](env.Cluster)
	aimed = aimed && shapes == nil
	switch {
	case aimed:
		shapes = []string{"split"}
	case shapes == nil:
		shapes = PartitionShapes
	}
	if env.replaying() {
		// The shapes of the faults replayed, whatever --param says.
		shapes = replayShapes(env)
		_, aimed = clusters.As[mastered](env.Cluster)
	}
	holderShapes, timedShapes, err := sortShapes(shapes, env.Cluster)
	if err != nil {
		return err
	}
	// A partition that did not take effect (a connection went through it)
	// ends the run: every later one would prove nothing either.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	p := &partitioner{env: env, ctx: ctx, stop: stop, r: rng(env, "partition")}
	if aimed {
		p.master = master
	}
	p.groups, p.addrs = serverGroups(env.Cluster)
	for _, g := range p.groups {
		p.servers = append(p.servers, g...)
	}
	if len(p.servers) == 0 {
		return errors.New("no server has a network namespace")
	}
	// Every draw from r happens under mu once the first hook is in place.
	p.nextHolder = time.Now().Add(between(p.r, 500*time.Millisecond, time.Second))
	p.nextReply = time.Now().Add(between(p.r, 500*time.Millisecond, time.Second))
	if len(holderShapes) > 0 {
		env.Workload.OnAcquire(func(proc *workloads.Process) { p.cutHolder(proc, holderShapes) })
	}
	if slices.Contains(shapes, "lost-reply") {
		env.Workload.OnInvoke(p.loseReply)
	}
	if slices.Contains(shapes, "lost-renewal") {
		env.Workload.OnAcquire(p.loseRenewals)
	}
	p.timed(timedShapes)
	return p.finish()
}

// sortShapes sorts the shapes a run draws from into those aimed at the
// holder (struck right after an acquire) and the timed ones; lost-reply is
// neither (it strikes as an acquire is sent). isolate-leader is dropped on
// a topology that elects no leader, unless it is the only shape asked for.
func sortShapes(shapes []string, cl clusters.Cluster) (holder, timed []string, err error) {
	_, hasLeader := clusters.As[clusters.Leader](cl)
	for _, s := range shapes {
		switch {
		case s == "isolate-leader" && !hasLeader:
			if len(shapes) == 1 {
				return nil, nil, fmt.Errorf("partition isolate-leader: topology %s elects no leader", cl.Topology())
			}
			// drawn from every shape: not for this topology
		case s == "isolate-holder" || s == "holder-minority":
			holder = append(holder, s)
		case s == "lost-reply" || s == "lost-renewal":
		default:
			timed = append(timed, s)
		}
	}
	return holder, timed, nil
}

// partitioner is one run of the partition fault: at most one partition at
// a time (the slot), shared by the timed loop and the workload's hooks.
type partitioner struct {
	env     *Env
	ctx     context.Context    // the run's, cancelled by stop
	stop    context.CancelFunc // ends the run: a partition had no effect
	groups  [][]*netns.Host    // the servers' namespaces, by group (serverGroups)
	addrs   map[*netns.Host]string
	servers []*netns.Host // every group's, in order
	wg      sync.WaitGroup

	mu         sync.Mutex
	r          *rand.Rand // shared with the hooks: drawn from under mu
	active     bool       // a partition holds the slot
	closed     bool       // the run is ending: no new partition
	fatal      error      // the partition that did not take effect
	nextHolder time.Time  // no holder shape before
	nextReply  time.Time  // no lost-reply or lost-renewal before
	master     mastered   // aim splits at the master (Sentinel), nil for none
}

// claim reserves the partition slot; false when one is active or the run
// is ending.
func (p *partitioner) claim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active || p.closed || p.fatal != nil {
		return false
	}
	p.active = true
	p.wg.Add(1)
	return true
}

// slotWait is how long a timed shape waits for the partition slot. A
// lost-reply that stands down (somebody took the lock while its rules
// went in) holds the slot for the time iptables takes, and tries again at
// the next acquire: on a loaded machine that is most of the time, and a
// timed shape that gave up at once never struck in a whole 5 s run (the
// nightly's redlock/partition was inconclusive in 4 of 9 runs at load
// 15-23). A partition in place holds the slot longer than this: the
// shape still gives up then, so that healthy periods stay between
// partitions.
const slotWait = 500 * time.Millisecond

// claimWithin claims the partition slot, trying every 20 ms for up to
// wait; false when it stayed taken, or the run is ending.
func (p *partitioner) claimWithin(wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for !p.claim() {
		if p.ending() || time.Now().After(deadline) || !sleep.For(p.ctx, 20*time.Millisecond) {
			return false
		}
	}
	return true
}

// ending says whether the run is ending or a partition failed: no claim
// can succeed any more.
func (p *partitioner) ending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed || p.fatal != nil
}

// done frees the partition slot claim reserved.
func (p *partitioner) done() {
	p.mu.Lock()
	p.active = false
	p.mu.Unlock()
	p.wg.Done()
}

// busy says whether a partition holds the slot.
func (p *partitioner) busy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active
}

// check probes a partition that just went in (stillConnected) and, when a
// connection still goes through, says so and stops the run.
func (p *partitioner) check(pairs [][2]*netns.Host, d time.Duration) error {
	err := stillConnected(pairs, p.addrs, min(probeTimeout, d/3))
	if err != nil {
		p.mu.Lock()
		if p.fatal == nil {
			p.fatal = err
			p.stop()
		}
		p.mu.Unlock()
	}
	return err
}

// hold, in the background, probes the partition that just went in
// (pairs), keeps it d in all, heals it, ends its fault and frees the slot.
func (p *partitioner) hold(end func(string), pairs [][2]*netns.Host, d time.Duration) {
	go func() {
		defer p.done()
		t0 := time.Now()
		perr := p.check(pairs, d)
		if perr == nil {
			sleep.For(p.ctx, d-time.Since(t0)) // (the probe's time included)
		}
		herr := p.env.Net.Heal(context.Background())
		detail := "healed"
		switch {
		case perr != nil:
			// A partition that cut nothing did not strike (the checker
			// reads "failed").
			detail = "failed: " + perr.Error()
		case herr != nil:
			detail = "heal failed: " + herr.Error()
		}
		end(detail)
	}()
}

// begin applies pairs, then heals them after s's length, in the
// background. When Block fails, what went in of it is healed at once.
func (p *partitioner) begin(s strike, target string, client int, pairs [][2]*netns.Host) {
	d := s.lengthOf()
	// Recorded first: rules take effect while Block runs.
	end := fault(p.env, s, target, client, fmt.Sprintf("%s for %s", s.Params["shape"], d))
	if err := p.env.Net.Block(context.Background(), pairs); err != nil {
		detail := "failed: " + err.Error()
		if herr := p.env.Net.Heal(context.Background()); herr != nil {
			detail += "; heal failed: " + herr.Error()
		}
		end(detail)
		p.done()
		return
	}
	p.hold(end, pairs, d)
}

// cutHolder (OnAcquire) cuts the client that just acquired from every
// server or from a minority of each group, when a holder shape is due.
// A holder shape that finds the slot taken stays due: it strikes after
// a later acquire.
func (p *partitioner) cutHolder(proc *workloads.Process, shapes []string) {
	if proc.Host == nil {
		return
	}
	grant := proc.GrantNo()
	p.mu.Lock()
	pl, due := p.replayed(shapes, grant)
	drawn := false
	if !p.env.replaying() && time.Now().After(p.nextHolder) {
		pl, due, drawn = cutPlan{shape: shapes[p.r.IntN(len(shapes))], d: scaled(p.r, p.env.TTL, 1.5, 3)}, true, true
	}
	p.mu.Unlock()
	if !due || !p.claim() {
		return // the slot is taken: still due, it strikes after a later acquire
	}
	p.mu.Lock()
	if drawn {
		p.nextHolder = time.Now().Add(pl.d + scaled(p.r, p.env.TTL, 1, 2))
	}
	cut := p.servers
	if pl.shape == "holder-minority" {
		cut = minority(p.r, p.groups)
	}
	p.mu.Unlock()
	if len(cut) == 0 {
		p.done()
		return
	}
	p.begin(p.enter(pl, grant), fmt.Sprintf("client %d | %s", proc.ID, names(cut)), proc.ID, clientPairs(proc.Host, cut))
}

// loseReply (OnInvoke) drops the servers' answers to a client as it sends
// an acquire that can succeed (nobody holds the lock), when lost-reply is
// due.
func (p *partitioner) loseReply(proc *workloads.Process, op history.Op) {
	env := p.env
	if op != history.Acquire || proc.Host == nil || env.Workload.Holders() > 0 {
		return
	}
	grant := env.Workload.Grants()
	pl, due := p.replyPlan("lost-reply", 1.5, 3, grant)
	if !due || !p.claim() {
		return
	}
	err := p.cutReplies(proc)
	if err == nil && env.Workload.Holders() > 0 {
		// Somebody took the lock while the rules went in: this acquire
		// cannot succeed. Stand down and try another - unless the heal
		// fails: then the cut is in effect and is recorded as the fault
		// it is (hold heals it again at its end).
		if herr := env.Net.Heal(context.Background()); herr == nil {
			p.mu.Lock()
			p.nextReply = time.Now()
			p.mu.Unlock()
			p.done()
			return
		}
	}
	s := p.enter(pl, grant)
	end := fault(env, s, fmt.Sprintf("%s -> client %d", names(p.servers), proc.ID), proc.ID, fmt.Sprintf("lost-reply for %s", s.lengthOf()))
	if err != nil {
		p.abortReplies(end, err) // (once: the fault ends here)
		return
	}
	// (The probe's SYN goes through, the answer must not.)
	p.hold(end, clientPairs(proc.Host, p.servers), s.lengthOf())
}

// loseRenewals (OnAcquire) drops the servers' answers to the client that
// just acquired for 0.85-0.95 TTL, when lost-renewal is due: its renewals
// (a watchdog's) reach the servers and take effect, their answers do not.
func (p *partitioner) loseRenewals(proc *workloads.Process) {
	env := p.env
	if proc.Host == nil {
		return
	}
	grant := proc.GrantNo()
	pl, due := p.replyPlan("lost-renewal", 0.85, 0.95, grant)
	if !due || !p.claim() {
		return
	}
	s := p.enter(pl, grant)
	end := fault(env, s, fmt.Sprintf("%s -> client %d", names(p.servers), proc.ID), proc.ID, fmt.Sprintf("lost-renewal for %s", s.lengthOf()))
	if err := p.cutReplies(proc); err != nil {
		p.abortReplies(end, err)
		return
	}
	p.hold(end, clientPairs(proc.Host, p.servers), s.lengthOf())
}

// replyDue draws the length, lo..hi TTLs, of the next cut of the servers'
// answers to a client (lost-reply, lost-renewal) when one is due.
func (p *partitioner) replyDue(lo, hi float64) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !time.Now().After(p.nextReply) {
		return 0, false
	}
	d := scaled(p.r, p.env.TTL, lo, hi)
	p.nextReply = time.Now().Add(d + scaled(p.r, p.env.TTL, 1, 2))
	return d, true
}

// abortReplies ends a cut of the servers' answers whose rules did not all
// go in: it heals what went in, ends the fault as failed and frees the slot.
func (p *partitioner) abortReplies(end func(string), err error) {
	detail := "failed: " + err.Error()
	if herr := p.env.Net.Heal(context.Background()); herr != nil {
		detail += "; heal failed: " + herr.Error()
	}
	end(detail)
	p.done()
}

// cutReplies drops every server's answers to proc.
func (p *partitioner) cutReplies(proc *workloads.Process) error {
	for _, s := range p.servers {
		if err := p.env.Net.BlockOneWay(context.Background(), s, proc.Host); err != nil {
			return err
		}
	}
	return nil
}

// clientPairs pairs client with each of servers.
func clientPairs(client *netns.Host, servers []*netns.Host) [][2]*netns.Host {
	pairs := make([][2]*netns.Host, 0, len(servers))
	for _, s := range servers {
		pairs = append(pairs, [2]*netns.Host{client, s})
	}
	return pairs
}

// finish waits, once the run ends, for the partition in place to heal, and
// returns the partition that did not take effect, if one did not.
func (p *partitioner) finish() error {
	<-p.ctx.Done()
	shut(&p.mu, &p.closed, &p.wg)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fatal
}

// mastered is a topology whose master its Sentinels name.
type mastered interface {
	MasterAddr(ctx context.Context) (string, error)
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
	if g, ok := clusters.As[clusters.Grouped](cl); ok {
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
