package nemesis

import (
	"fmt"
	"strconv"
	"time"

	"github.com/locktest/locktest/clusters/proxy"
)

// speedPlan is a network-speed strike about to go in: its rule, toxic and
// length, drawn by the seed or, in a replay, the entry's (replay).
type speedPlan struct {
	rule   Rule
	grant  int64 // the opportunity it strikes at (the run's grants so far)
	t      proxy.Toxic
	d      time.Duration
	replay *strike // the entry replayed (taken), nil when drawn
}

// kindOf is the proxy toxic each network-speed fault puts on its links.
var kindOf = map[string]proxy.Kind{
	FaultDelay: proxy.Delay, FaultSlowNode: proxy.Delay, FaultStall: proxy.Stall,
	FaultReset: proxy.Reset, FaultBandwidth: proxy.Bandwidth, FaultLoss: proxy.Loss,
}

// The params of a network-speed fault's schedule entry: its toxic.
const (
	paramDirection = "direction" // proxy.Direction: both, upstream, downstream
	paramLatency   = "latency"   // delay, slow-node: a Go duration
	paramJitter    = "jitter"    // delay, slow-node: a Go duration
	paramRate      = "rate"      // bandwidth: whole KB/s
	paramShare     = "share"     // loss: the share of the data lost, in (0, 1)
)

// aimOf is the aim (--param delay-at) a client-link rule strikes at.
func aimOf(r Rule) string {
	if r == RuleAcquirer {
		return AimInFlight
	}
	if r == RuleHolder {
		return AimHolder
	}
	return ""
}

// toxicParams are the params an entry records of toxic t.
func toxicParams(t proxy.Toxic) map[string]string {
	p := map[string]string{paramDirection: string(t.Direction)}
	switch t.Kind {
	case proxy.Delay:
		p[paramLatency], p[paramJitter] = dur(t.Latency), dur(t.Jitter)
	case proxy.Bandwidth:
		p[paramRate] = strconv.FormatInt(t.RateKB, 10)
	case proxy.Loss:
		p[paramShare] = strconv.FormatFloat(t.Share, 'g', -1, 64)
	}
	return p
}

// toxicOf reads the toxic of network-speed fault e's entry; its error
// names the param that is wrong.
func toxicOf(e Entry) (proxy.Toxic, error) {
	t := proxy.Toxic{Kind: kindOf[e.Nemesis]}
	var err error
	if t.Direction, err = proxy.ParseDirection(e.Params[paramDirection]); err != nil {
		return t, fmt.Errorf("%s: params %s: %w", e.Nemesis, paramDirection, err)
	}
	switch t.Kind {
	case proxy.Delay:
		if t.Latency, err = time.ParseDuration(e.Params[paramLatency]); err != nil || t.Latency <= 0 {
			return t, fmt.Errorf("%s: params %s %q: want a duration such as 1.5s", e.Nemesis, paramLatency, e.Params[paramLatency])
		}
		if v := e.Params[paramJitter]; v != "" {
			if t.Jitter, err = time.ParseDuration(v); err != nil || t.Jitter < 0 {
				return t, fmt.Errorf("%s: params %s %q: want a duration such as 10ms", e.Nemesis, paramJitter, v)
			}
			if t.Jitter >= t.Latency {
				return t, fmt.Errorf("%s: params %s %q: want less than its %s (%s)", e.Nemesis, paramJitter, v, paramLatency, t.Latency)
			}
		}
	case proxy.Bandwidth:
		if t.RateKB, err = strconv.ParseInt(e.Params[paramRate], 10, 64); err != nil || t.RateKB < 1 {
			return t, fmt.Errorf("%s: params %s %q: want whole KB/s from 1", e.Nemesis, paramRate, e.Params[paramRate])
		}
	case proxy.Loss:
		if t.Share, err = strconv.ParseFloat(e.Params[paramShare], 64); err != nil || t.Share <= 0 || t.Share >= 1 {
			return t, fmt.Errorf("%s: params %s %q: want a share between 0 and 1", e.Nemesis, paramShare, e.Params[paramShare])
		}
	}
	return t, nil
}

// replayPlan is the plan of replayed entry sk (validated, so its toxic
// reads), struck at opportunity grant.
func replayPlan(sk strike, grant int64) speedPlan {
	t, _ := toxicOf(sk.Entry)
	return speedPlan{rule: sk.Target, grant: grant, t: t, d: sk.lengthOf(), replay: &sk}
}

// enter is the strike of pl: the replayed entry (taken when it was
// planned), or the drawn one entered now, as it strikes.
func (s *striker) enter(pl speedPlan) strike {
	if pl.replay != nil {
		return *pl.replay
	}
	return s.env.drawn(Entry{Nemesis: s.fault, Trigger: s.env.triggerAt(pl.grant), Target: pl.rule,
		Length: dur(pl.d), Params: toxicParams(pl.t)})
}
