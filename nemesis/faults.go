package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/workloads"
)

// pauseServer freezes a server for a while. Server faults never act on one
// server at once (a frozen server is not killed, a restarting one is not
// frozen): when kill is acting on the server drawn, pause-server freezes
// another one (aimed at the leader, or on a single server: it waits its
// turn, up to turnWait), with a note in the history either way.
type pauseServer struct{}

func (*pauseServer) Name() string { return "pause-server" }

// turnWait bounds how long pause-server waits for a server another fault
// acts on (kill + restart holds one for 0.8-1.9 s on docker, a JVM's
// restart longer).
const turnWait = 10 * time.Second

// Run freezes a server right after a grant (as kill strikes): a server
// frozen while the lock is held is the case that tests the lock; one
// frozen while nobody held it proves nothing. Its target is among the
// servers that granted the lock (Redlock), or the leader (serverTurn).
func (*pauseServer) Run(ctx context.Context, env *Env) error {
	r := rng(env, "pause-server")
	nodes := env.Cluster.Nodes()
	grants := grantSignal(env)
	for {
		t, ok, err := serverTurn(ctx, env, r, "pause-server", nodes, grants)
		if err != nil || !ok {
			return err
		}
		n, rule := t.leader, RuleLeader
		if n == nil {
			n, rule = serverTarget(env, r, nodes, t.rule())
		}
		d := t.length(func() time.Duration { return scaled(r, env.TTL, 0.5, 2) })
		n, release := claimTurn(ctx, env, r, nodes, n, rule)
		if release == nil {
			continue
		}
		how := pauseHow(n)
		// Recorded as the pause is sent (docker pause takes a while).
		s := t.strike(env, Entry{Nemesis: "pause-server", Target: rule, Length: dur(d)})
		end := fault(env, s, n.Name(), 0, fmt.Sprintf("%s for %s", how[0], d))
		if err := n.Pause(); err != nil {
			// Nothing froze: the history says so (the fault struck
			// nothing) and the run goes on. A pause that timed out may
			// still land: thaw it, in case.
			_ = n.Resume()
			end("failed: " + err.Error())
			release()
			continue
		}
		sleep.For(ctx, d)
		err = n.Resume()
		end(how[1])
		release()
		if err != nil {
			return err
		}
	}
}

// pauseHow says how n is frozen and thawed, for the history: SIGSTOP and
// SIGCONT, or what the node says it does (docker pause and unpause).
func pauseHow(n clusters.Node) [2]string {
	if p, ok := n.(interface{ PauseHow() (string, string) }); ok {
		a, b := p.PauseHow()
		return [2]string{a, b}
	}
	return [2]string{"SIGSTOP", "SIGCONT"}
}

// claimTurn claims n for pause-server. When another fault acts on it, it
// claims another server instead, one of those that granted the current
// holder's lock when one of them is free, else any free one (not when
// aimed at the leader: the leader it is); with none, it waits for n, up to
// turnWait or the end of the run. It notes in the history what it did, and
// returns the server and its release function, nil when the turn is lost.
func claimTurn(ctx context.Context, env *Env, r *rand.Rand, nodes []clusters.Node, n clusters.Node, rule Rule) (clusters.Node, func()) {
	release, holder, ok := env.claimNode(n.Name(), "pause-server")
	if ok {
		return n, release
	}
	if rule != RuleLeader {
		for _, pool := range [][]clusters.Node{granting(env, nodes), nodes} {
			for _, i := range r.Perm(len(pool)) {
				m := pool[i]
				if m.Name() == n.Name() {
					continue
				}
				if release, _, ok := env.claimNode(m.Name(), "pause-server"); ok {
					note(env, fmt.Sprintf("pause-server skipped %s: %s is acting on it; took %s instead", n.Name(), holder, m.Name()))
					return m, release
				}
			}
		}
	}
	t0 := time.Now()
	release, holder, ok = env.awaitNode(ctx, n.Name(), "pause-server", turnWait)
	waited := time.Since(t0).Round(time.Millisecond)
	switch {
	case ok:
		note(env, fmt.Sprintf("pause-server waited %s for %s: %s was acting on it", waited, n.Name(), holder))
		return n, release
	case ctx.Err() != nil:
		return nil, nil // the run ended
	}
	skipped(env, "pause-server", n.Name(), fmt.Sprintf("%s was acting on it for %s", holder, waited))
	return nil, nil
}

// killServer kills a server and restarts it (see pauseServer for a server
// another fault is acting on).
type killServer struct{}

func (*killServer) Name() string { return "kill" }

// Run kills servers right after a grant: a server that forgets the lock
// while its holder has most of its hold still ahead hurts most (the
// killed servers come back before the holder is done).
func (*killServer) Run(ctx context.Context, env *Env) error {
	r := rng(env, "kill")
	nodes := env.Cluster.Nodes()
	grants := grantSignal(env)
	for {
		t, ok, err := serverTurn(ctx, env, r, "kill", nodes, grants)
		if err != nil || !ok {
			return err
		}
		victims, rule := []clusters.Node{t.leader}, RuleLeader
		if t.leader == nil {
			victims, rule = killTargets(env, r, nodes, t.rule())
		}
		down := t.length(func() time.Duration { return between(r, 300*time.Millisecond, time.Second) })
		release, ok := claimNodes(env, "kill", victims)
		if !ok {
			continue
		}
		err = killAndRestart(ctx, env, t.strike(env, Entry{Nemesis: "kill", Target: rule, Length: dur(down)}), victims)
		release()
		if err != nil {
			return err
		}
	}
}

// claimNodes reserves every one of nodes for fault, or none (the turn is
// skipped, and a note says which fault acts on the server).
func claimNodes(env *Env, fault string, nodes []clusters.Node) (release func(), ok bool) {
	var releases []func()
	releaseAll := func() {
		for _, rel := range releases {
			rel()
		}
	}
	for _, n := range nodes {
		rel, holder, ok := env.claimNode(n.Name(), fault)
		if !ok {
			skipped(env, fault, n.Name(), holder+" is acting on it")
			releaseAll()
			return nil, false
		}
		releases = append(releases, rel)
	}
	return releaseAll, true
}

// killAndRestart kills victims at once, keeps them down for s's length and
// restarts them, recording the kill as one fault.
func killAndRestart(ctx context.Context, env *Env, s strike, victims []clusters.Node) error {
	down := s.lengthOf()
	names := make([]string, 0, len(victims))
	for _, n := range victims {
		names = append(names, n.Name())
	}
	// Recorded as the kill is sent: on some backends it takes a while to
	// land (docker kill: 50-300 ms).
	end := fault(env, s, strings.Join(names, ","), 0, killDetail(env, victims, down))
	var errs []error
	killed := make([]clusters.Node, 0, len(victims))
	for _, n := range victims {
		if err := n.Kill(); err != nil {
			errs = append(errs, fmt.Errorf("kill %s: %w", n.Name(), err))
			break
		}
		killed = append(killed, n)
	}
	if len(errs) == 0 {
		sleep.For(ctx, down)
	}
	// Restart even when the run is ending (or a kill failed): the cluster
	// must be whole for a clean stop. A fresh context bounds the restarts.
	rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	keeps := true
	for _, n := range killed {
		if err := n.Restart(rctx); err != nil {
			errs = append(errs, fmt.Errorf("restart %s: %w", n.Name(), err))
		}
		if k, ok := n.(interface{ KeepsData() bool }); !ok || !k.KeepsData() {
			keeps = false
		}
	}
	cancel()
	// The fault ends before the servers are free for another: a fault
	// waiting its turn starts after this one ended.
	if err := errors.Join(errs...); err != nil {
		if len(killed) > 0 {
			end("struck, then failed: " + err.Error()) // some server did go down
		} else {
			end("failed: " + err.Error())
		}
		return err
	}
	if keeps {
		end("restarted with its data")
	} else {
		end("restarted")
	}
	return nil
}

// killDetail says how a kill of victims goes and, on a topology whose
// clients' sessions live on its primary, whether the primary went with
// it (the checker reads this: history.KilledPrimary).
func killDetail(env *Env, victims []clusters.Node, down time.Duration) string {
	detail := fmt.Sprintf("SIGKILL, restart after %s", down.Round(time.Millisecond))
	if p, ok := clusters.As[clusters.Primaried](env.Cluster); ok {
		if slices.ContainsFunc(victims, func(n clusters.Node) bool { return n.Name() == p.Primary().Name() }) {
			detail += ", " + history.KilledPrimary
		} else {
			detail += ", " + history.KilledReplica
		}
	}
	return detail
}

// killTargets picks the servers a kill hits by rule. RuleGranters: when
// the current holder's grant names the servers that granted it (Redlock),
// just enough of those for another client to be able to win a majority
// once they come back empty (1 when the grant had a bare majority, 3 when
// all 5 granted); otherwise one server, as serverTarget picks it.
// RuleAnyServer: one server. With rule "" the rule that fits.
func killTargets(env *Env, r *rand.Rand, nodes []clusters.Node, rule Rule) ([]clusters.Node, Rule) {
	if g := granting(env, nodes); len(g) > 0 && rule != RuleAnyServer {
		k := max(1, len(nodes)/2+1-(len(nodes)-len(g)))
		if k <= len(g) {
			order := r.Perm(len(g))
			out := make([]clusters.Node, 0, k)
			for _, i := range order[:k] {
				out = append(out, g[i])
			}
			slices.SortFunc(out, func(a, b clusters.Node) int { return strings.Compare(a.Name(), b.Name()) })
			return out, RuleGranters
		}
	}
	n, rule := serverTarget(env, r, nodes, rule)
	return []clusters.Node{n}, rule
}

// target picks the server a server fault hits: as serverTarget does, or
// with param "leader" (--param kill=leader, pause-server=leader) the
// current leader of a topology that elects one (clusters.Leader).
func target(ctx context.Context, env *Env, r *rand.Rand, nodes []clusters.Node, param string) (clusters.Node, error) {
	if param != "leader" {
		n, _ := serverTarget(env, r, nodes, "")
		return n, nil
	}
	l, ok := clusters.As[clusters.Leader](env.Cluster)
	if !ok {
		return nil, fmt.Errorf("topology %s has no leader to aim at", env.Cluster.Topology())
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leader, err := l.Leader(lctx)
	if err != nil {
		return nil, fmt.Errorf("find the leader: %w", err)
	}
	return leader, nil
}

// granting returns the nodes that granted the lock to a current holder (the
// first holder whose grant names them), nil when no holder's grant does.
func granting(env *Env, nodes []clusters.Node) []clusters.Node {
	if env.Workload == nil {
		return nil
	}
	for _, g := range env.Workload.HolderGrants() {
		var out []clusters.Node
		for _, n := range nodes {
			if slices.Contains(g.Nodes, n.Addr()) {
				out = append(out, n)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// grantSignal returns a channel that receives (without blocking the
// workload) after every successful acquire; nil without a workload.
func grantSignal(env *Env) chan struct{} {
	if env.Workload == nil {
		return nil
	}
	ch := make(chan struct{}, 1)
	env.Workload.OnAcquire(func(*workloads.Process) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	return ch
}

// waitForGrant returns right after the next successful acquire (one that
// happened before the call does not count), or after limit if somebody
// holds the lock then (or as soon as somebody does), or when ctx ends. It
// reports whether a grant woke it.
func waitForGrant(ctx context.Context, env *Env, grants chan struct{}, limit time.Duration) bool {
	if grants == nil {
		return false
	}
	select {
	case <-grants: // a grant from before: stale
	default:
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-grants:
		return true
	case <-ctx.Done():
		return false
	case <-timer.C:
	}
	for env.Workload.Holders() == 0 && sleep.For(ctx, 5*time.Millisecond) {
		select {
		case <-grants:
			return true
		default:
		}
	}
	return false
}
