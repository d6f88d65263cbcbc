package nemesis

import (
	"slices"
	"time"
)

// cutPlan is a partition about to strike: its shape and length, drawn or,
// in a replay, the entry's.
type cutPlan struct {
	shape     string
	d         time.Duration
	aimMaster bool    // a split aimed at Sentinel's master (masterMinority)
	replay    *strike // the entry replayed, nil when drawn
}

// replayShapes are the shapes of the partitions a replay strikes.
func replayShapes(env *Env) []string {
	var out []string
	for _, e := range env.Replay.Faults {
		if sh := e.Params["shape"]; e.Nemesis == "partition" && !slices.Contains(out, sh) {
			out = append(out, sh)
		}
	}
	return out
}

// replayed returns, in a replay, the next partition entry when it takes
// one of shapes and its trigger came at opportunity grant.
func (p *partitioner) replayed(shapes []string, grant int64) (cutPlan, bool) {
	if !p.env.replaying() {
		return cutPlan{}, false
	}
	s, ok := p.env.next("partition")
	if !ok || !slices.Contains(shapes, s.Params["shape"]) || !p.env.came(s.Trigger, grant) {
		return cutPlan{}, false
	}
	return cutPlan{shape: s.Params["shape"], d: s.lengthOf(), aimMaster: s.Params["aim"] == "master", replay: &s}, true
}

// replyPlan is the next cut of the servers' answers to a client (shape
// lost-reply or lost-renewal, lo..hi TTLs long), when one is due.
func (p *partitioner) replyPlan(shape string, lo, hi float64, grant int64) (cutPlan, bool) {
	if p.env.replaying() {
		return p.replayed([]string{shape}, grant)
	}
	d, due := p.replyDue(lo, hi)
	return cutPlan{shape: shape, d: d}, due
}

// enter is the strike of pl, struck at opportunity grant: the replayed
// entry, taken, or a drawn one entered.
func (p *partitioner) enter(pl cutPlan, grant int64) strike {
	if pl.replay != nil {
		p.env.take(*pl.replay, grant)
		return *pl.replay
	}
	e := Entry{Nemesis: "partition", Trigger: p.env.triggerAt(grant), Target: ruleOfShape[pl.shape], Length: dur(pl.d),
		Params: map[string]string{"shape": pl.shape}}
	if pl.aimMaster {
		e.Params["aim"] = "master"
	}
	return p.env.drawn(e)
}
