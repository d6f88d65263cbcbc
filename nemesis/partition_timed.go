package nemesis

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/sleep"
)

// timed strikes the timed shapes, one at a time, at random times (in a
// replay, at the entries' triggers), until the run ends.
func (p *partitioner) timed(shapes []string) {
	if p.env.replaying() {
		p.timedReplay(shapes)
		return
	}
	for len(shapes) > 0 && sleep.For(p.ctx, p.nextWait()) {
		pl := p.drawTimed(shapes)
		a, b := p.sides(pl.shape, pl.aimMaster)
		if len(a) == 0 || len(b) == 0 || !p.claimWithin(slotWait) {
			continue
		}
		p.begin(p.enter(pl, 0), p.timedTarget(pl.shape, a, b), 0, cross(a, b))
		// Wait for this partition to heal before drawing the next one.
		for p.busy() && sleep.For(p.ctx, 50*time.Millisecond) {
		}
	}
}

// timedTarget names the two sides of a timed shape.
func (p *partitioner) timedTarget(shape string, a, b []*netns.Host) string {
	target := names(a) + " | " + names(b)
	if shape == "bridge" {
		// The node on neither side stays connected to both.
		for _, s := range p.servers {
			if !slices.Contains(a, s) && !slices.Contains(b, s) {
				target += " (" + s.Name + " bridges them)"
			}
		}
	}
	return target
}

// nextWait draws the healthy period before the next timed shape.
func (p *partitioner) nextWait() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return between(p.r, time.Second, 3*time.Second)
}

// drawTimed draws a timed shape and its length.
func (p *partitioner) drawTimed(shapes []string) cutPlan {
	p.mu.Lock()
	defer p.mu.Unlock()
	shape := shapes[p.r.IntN(len(shapes))]
	return cutPlan{shape: shape, d: scaled(p.r, p.env.TTL, 1.5, 3), aimMaster: p.master != nil && shape == "split"}
}

// sides draws the two sides of a timed shape: the servers, and the
// clients' namespaces split between them (a split aimed at the master puts
// it on the minority side; isolate-leader cuts the leader off).
func (p *partitioner) sides(shape string, aimMaster bool) (a, b []*netns.Host) {
	p.mu.Lock()
	var clients []*netns.Host
	for _, proc := range p.env.Workload.Processes() {
		if proc.Host != nil {
			clients = append(clients, proc.Host)
		}
	}
	slices.SortFunc(clients, func(a, b *netns.Host) int { return strings.Compare(a.Name, b.Name) })
	a, b = groupedSides(p.r, shape, p.groups, clients)
	p.mu.Unlock()
	if aimMaster && p.master != nil && shape == "split" {
		a, b = masterMinority(p.ctx, p.master, p.groups, p.addrs, a, b)
	}
	if l, ok := clusters.As[clusters.Leader](p.env.Cluster); ok && shape == "isolate-leader" {
		a, b = leaderSides(p.ctx, l, p.servers, clients)
	}
	return a, b
}

// timedReplay strikes the replayed entries of the timed shapes at their
// triggers, one at a time; the hooks strike the others (cutHolder,
// loseReply, loseRenewals), in the schedule's order.
func (p *partitioner) timedReplay(shapes []string) {
	grants := grantSignal(p.env)
	for p.ctx.Err() == nil {
		s, ok := p.env.next("partition")
		if !ok {
			return // nothing left to replay
		}
		shape := s.Params["shape"]
		if !slices.Contains(shapes, shape) || p.busy() {
			sleep.For(p.ctx, 50*time.Millisecond) // a hook's turn, or one under way
			continue
		}
		grant, ok := p.env.awaitTrigger(p.ctx, s, grants)
		if !ok {
			return
		}
		a, b := p.sides(shape, s.Params["aim"] == "master")
		if len(a) == 0 || len(b) == 0 || !p.claimWithin(slotWait) {
			sleep.For(p.ctx, 50*time.Millisecond)
			continue
		}
		p.env.take(s, grant)
		p.begin(s, p.timedTarget(shape, a, b), 0, cross(a, b))
		for p.busy() && sleep.For(p.ctx, 50*time.Millisecond) {
		}
	}
}

// masterMinority aims a split (sides a, the minority of each server group,
// and b, as groupedSides drew them) at Sentinel's split brain: the master
// goes to the minority side, in the place of the data node drawn there,
// and each side keeps at least one client. Unchanged when the master
// cannot be found.
func masterMinority(ctx context.Context, m mastered, groups [][]*netns.Host, addrs map[*netns.Host]string, a, b []*netns.Host) ([]*netns.Host, []*netns.Host) {
	mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addr, err := m.MasterAddr(mctx)
	if err != nil {
		return a, b
	}
	var mh *netns.Host
	for h, x := range addrs {
		if x == addr {
			mh = h
		}
	}
	if i := slices.Index(b, mh); mh != nil && i >= 0 {
		// The member of the master's group on the minority side trades
		// places with the master.
		var group []*netns.Host
		for _, g := range groups {
			if slices.Contains(g, mh) {
				group = g
			}
		}
		for j, h := range a {
			if slices.Contains(group, h) {
				a[j], b[i] = b[i], a[j]
				break
			}
		}
	}
	// Clients on both sides: one moves over to a side that has none.
	isClient := func(h *netns.Host) bool { _, server := addrs[h]; return !server }
	count := func(hs []*netns.Host) int {
		return len(slices.DeleteFunc(slices.Clone(hs), func(h *netns.Host) bool { return !isClient(h) }))
	}
	if count(a) == 0 && count(b) > 1 {
		k := slices.IndexFunc(b, isClient)
		a, b = append(a, b[k]), slices.Delete(b, k, k+1)
	} else if count(b) == 0 && count(a) > 1 {
		k := slices.IndexFunc(a, isClient)
		b, a = append(b, a[k]), slices.Delete(a, k, k+1)
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
