package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/sleep"
)

// turn is the next strike of a server fault (kill, pause-server): when it
// came, and in a replay the entry it replays.
type turn struct {
	trigger Trigger
	replay  *strike       // the entry taken, nil in a drawn run
	leader  clusters.Node // the leader, found before the grant, when aimed at it
}

// serverTurn waits for the next strike of server fault name. Drawn: a
// seeded healthy period, then right after the next grant (or, after two
// TTLs without one, as soon as somebody holds the lock); --param
// NAME=leader aims it at the leader. In a replay: the next entry's
// trigger, aimed by its rule. ok is false when the run ended first.
func serverTurn(ctx context.Context, env *Env, r *rand.Rand, name string, nodes []clusters.Node, grants chan struct{}) (turn, bool, error) {
	var t turn
	aim := Rule("")
	if env.replaying() {
		s, ok := env.next(name)
		if !ok {
			<-ctx.Done() // nothing left to replay
			return t, false, nil
		}
		t.replay, aim = &s, s.Target
	} else {
		if !sleep.For(ctx, between(r, time.Second, 3*time.Second)) {
			return t, false, nil
		}
		if env.Settings.aimsAtLeader(name) {
			aim = RuleLeader
		}
	}
	if aim == RuleLeader {
		// Asking an ensemble takes longer than a short hold: first.
		var err error
		if t.leader, err = target(ctx, env, r, nodes, "leader"); err != nil {
			if ctx.Err() != nil {
				return t, false, nil // the run ended while an election was under way
			}
			return t, false, err
		}
	}
	if t.replay != nil {
		grant, ok := env.awaitTrigger(ctx, *t.replay, grants)
		if !ok {
			return t, false, nil
		}
		env.take(*t.replay, grant)
		return t, true, nil
	}
	t.trigger = at(env.elapsed())
	if waitForGrant(ctx, env, grants, 2*env.TTL) {
		t.trigger = afterGrant(env.Workload.Grants())
	}
	return t, ctx.Err() == nil, nil
}

// rule is the targeting rule the turn replays, "" in a drawn run (the
// fault picks the one that fits).
func (t turn) rule() Rule {
	if t.replay != nil {
		return t.replay.Target
	}
	return ""
}

// length is the turn's length: the replayed entry's, or draw's.
func (t turn) length(draw func() time.Duration) time.Duration {
	if t.replay != nil {
		return t.replay.lengthOf()
	}
	return draw().Round(time.Millisecond)
}

// strike is the turn's entry: the replayed one, or e entered as drawn.
func (t turn) strike(env *Env, e Entry) strike {
	if t.replay != nil {
		return *t.replay
	}
	e.Trigger = t.trigger
	return env.drawn(e)
}

// serverTarget picks the one server a server fault hits by rule:
// RuleGranters, one of the servers that granted the current holder's
// lock when its grant names some but not all (Redlock's majority: a
// restarted or frozen member lets a second majority form), else any;
// RuleAnyServer, any, drawn by the seed. With rule "" the rule that
// fits: granters when a holder's grant names its servers.
func serverTarget(env *Env, r *rand.Rand, nodes []clusters.Node, rule Rule) (clusters.Node, Rule) {
	g := granting(env, nodes)
	if rule == "" {
		rule = RuleAnyServer
		if len(g) > 0 {
			rule = RuleGranters
		}
	}
	n := nodes[r.IntN(len(nodes))]
	if rule == RuleGranters && len(g) > 0 && len(g) < len(nodes) {
		n = g[r.IntN(len(g))]
	}
	return n, rule
}
