package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters/proxy"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/workloads"
)

// netSpeed is one of the network-speed faults (NetSpeedFaults).
type netSpeed struct{ name string }

func (f *netSpeed) Name() string { return f.name }

// ErrLinkFaultNoEffect: a probe of a link that a network-speed fault had
// just struck saw it as fast, or as open, as before.
var ErrLinkFaultNoEffect = errors.New("did not take effect")

// Run strikes one link fault at a time, each from a schedule entry: the
// client-link faults at their aim (an acquire in flight, the holder),
// slow-node right after a grant; drawn by the seed, or in a replay the
// entries' triggers, rules and toxics. Each strike is probed as it goes
// in; one that did not take effect ends the run (a harness error, as a
// partition that cut nothing).
func (f *netSpeed) Run(ctx context.Context, env *Env) error {
	if env.Links == nil {
		return errors.New("the run has no proxies on its links")
	}
	p, err := parseSpeedParams(f.name, env.Params)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if strings.TrimSpace(env.Params["delay-at"]) == "" {
		p.aims = DefaultAims(env.Traits)
	}
	s := &striker{env: env, fault: f.name, p: p, ctx: ctx, stop: stop, r: rng(env, f.name)}
	s.next = time.Now().Add(between(s.r, 500*time.Millisecond, time.Second))
	s.aim = s.drawAim()
	if f.name == FaultSlowNode {
		s.slowNodes()
	} else {
		env.Workload.OnInvoke(s.inFlight)
		env.Workload.OnAcquire(s.holder)
	}
	<-ctx.Done()
	shut(&s.mu, &s.closed, &s.wg)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// striker is one run of a network-speed fault: one strike at a time.
type striker struct {
	env   *Env
	fault string
	p     speedParams
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu     sync.Mutex
	r      *rand.Rand // drawn from under mu
	next   time.Time  // no strike before
	aim    string     // the next strike's aim
	soon   bool       // the strike under way missed: the next may come at once
	active bool
	closed bool
	fatal  error
}

func (s *striker) drawAim() string { return s.p.aims[s.r.IntN(len(s.p.aims))] }

// free reports whether the strike slot is free (under mu).
func (s *striker) free() bool { return !s.active && !s.closed && s.fatal == nil }

// takeSlot takes the strike slot (under mu, free).
func (s *striker) takeSlot() {
	s.active = true
	s.wg.Add(1)
}

// due takes the strike slot and plans the strike when a client-link strike
// aimed by rule is due at opportunity grant: drawn, after the healthy
// period when the aim drawn is rule's; in a replay, when the next entry is
// aimed by rule and its trigger came (the entry is taken).
func (s *striker) due(rule Rule, grant int64) (speedPlan, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.free() {
		return speedPlan{}, false
	}
	if s.env.replaying() {
		sk, ok := s.env.next(s.fault)
		if !ok || sk.Target != rule || !s.env.came(sk.Trigger, grant) {
			return speedPlan{}, false
		}
		s.env.take(sk, grant)
		s.takeSlot()
		return replayPlan(sk, grant), true
	}
	if time.Now().Before(s.next) || aimOf(rule) != s.aim {
		return speedPlan{}, false
	}
	s.takeSlot()
	t, d := s.drawToxic(aimOf(rule))
	return speedPlan{rule: rule, grant: grant, t: t, d: d}, true
}

// done frees the slot and schedules the next strike after a healthy
// period of 1-2 TTLs.
func (s *striker) done() {
	s.mu.Lock()
	s.active = false
	s.next = time.Now().Add(scaled(s.r, s.env.TTL, 1, 2))
	if s.soon {
		// The strike missed (the acquire it aimed at was refused): the
		// same aim again, soon, until one lands on a grant.
		s.next, s.soon = time.Now().Add(between(s.r, 100*time.Millisecond, 300*time.Millisecond)), false
	} else {
		s.aim = s.drawAim()
	}
	s.mu.Unlock()
	s.wg.Done()
}

// inFlight (OnInvoke) strikes the links of a client sending an acquire
// that can succeed.
func (s *striker) inFlight(proc *workloads.Process, op history.Op) {
	if op != history.Acquire || proc.Host == nil || s.env.Workload.Holders() > 0 {
		return
	}
	if pl, ok := s.due(RuleAcquirer, s.env.Workload.Grants()); ok {
		s.strikeClient(proc, pl)
	}
}

// holder (OnAcquire) strikes the links of the client that just acquired.
func (s *striker) holder(proc *workloads.Process) {
	if proc.Host == nil {
		return
	}
	if pl, ok := s.due(RuleHolder, proc.GrantNo()); ok {
		s.strikeClient(proc, pl)
	}
}

// strikeClient puts pl's toxic on proc's links (the slot is taken).
func (s *striker) strikeClient(proc *workloads.Process, pl speedPlan) {
	links := s.env.Links.ClientLinks(proc.Host)
	if len(links) == 0 {
		s.unplanned(pl, fmt.Sprintf("client %d has no proxied links", proc.ID))
		return
	}
	target := fmt.Sprintf("client %d | %s", proc.ID, linkServers(links))
	t := pl.t
	var missed func() bool
	if pl.rule == RuleAcquirer {
		// Once the probe has waited out the delay (and the jitter), the
		// acquire aimed at has been answered: when its client does not hold the lock,
		// another client's acquire won, and the strike stands down.
		missed = func() bool {
			sleep.For(s.ctx, 2*t.Jitter+100*time.Millisecond) // the answer's own jitter
			return !s.env.Workload.Holding(proc.ID)
		}
	}
	s.begin(target, proc.ID, pl, links, missed)
}

// unplanned frees the slot of a plan that cannot strike; a replayed entry
// stays in the schedule, not fired, with why.
func (s *striker) unplanned(pl speedPlan, why string) {
	if pl.replay != nil {
		s.env.skip(*pl.replay, why)
	}
	s.done()
}

// slowNodes strikes slow-node right after grants: one server's links from
// every client (one of those that granted the holder, when its grant
// names them); in a replay at the entries' triggers, by their rules.
func (s *striker) slowNodes() {
	nodes := s.env.Cluster.Nodes()
	grants := grantSignal(s.env)
	go func() {
		for s.ctx.Err() == nil {
			pl, ok := s.slowNodePlan(grants)
			if !ok {
				continue
			}
			s.mu.Lock()
			n, rule := serverTarget(s.env, s.r, nodes, pl.rule)
			s.mu.Unlock()
			pl.rule = rule
			links := s.env.Links.ServerLinks(n.Name())
			if len(links) == 0 {
				s.unplanned(pl, n.Name()+" has no proxied links")
				continue
			}
			s.begin(n.Name()+" (every client's link)", 0, pl, links, nil)
		}
	}()
}

// slowNodePlan waits for the next slow-node strike and takes the slot:
// drawn, right after a grant once the slot is free; in a replay, the next
// entry's trigger (a strike still under way then delays it to the next
// opportunity once it is over). ok is false when none is due (the run
// ended, or the slot was taken: the caller loops).
func (s *striker) slowNodePlan(grants chan struct{}) (speedPlan, bool) {
	if !s.env.replaying() {
		waitForGrant(s.ctx, s.env, grants, 2*s.env.TTL)
		if pl, ok := s.drawSlowNode(); ok {
			return pl, true
		}
		sleep.For(s.ctx, 20*time.Millisecond)
		return speedPlan{}, false
	}
	sk, ok := s.env.next(s.fault)
	if !ok {
		<-s.ctx.Done() // nothing left to replay
		return speedPlan{}, false
	}
	grant, ok := s.env.awaitTrigger(s.ctx, sk, grants)
	for ok {
		s.mu.Lock()
		if s.free() {
			s.env.take(sk, grant)
			s.takeSlot()
			s.mu.Unlock()
			return replayPlan(sk, grant), true
		}
		s.mu.Unlock()
		ok = sleep.For(s.ctx, 20*time.Millisecond)
		grant = s.env.Workload.Grants()
	}
	return speedPlan{}, false
}

// drawSlowNode takes the slot and draws a slow-node strike when the slot
// is free and the healthy period is over.
func (s *striker) drawSlowNode() (speedPlan, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil || !s.free() || time.Now().Before(s.next) {
		return speedPlan{}, false
	}
	s.takeSlot()
	t, d := s.drawToxic("")
	return speedPlan{grant: s.env.Workload.Grants(), t: t, d: d}, true
}

// drawToxic draws the toxic of a strike aimed at aim and its length
// (under mu).
func (s *striker) drawToxic(aim string) (proxy.Toxic, time.Duration) {
	ttl, p := s.env.TTL, s.p
	d := scaled(s.r, ttl, 1.5, 3)
	t := proxy.Toxic{Direction: proxy.Both}
	switch s.fault {
	case FaultDelay, FaultSlowNode:
		t.Kind, t.Jitter = proxy.Delay, p.jitter
		lo, hi := p.lo, p.hi
		if hi == 0 {
			lo, hi = scaled(s.r, ttl, 1.2, 1.2), scaled(s.r, ttl, 2.5, 2.5)
			if s.fault == FaultSlowNode {
				lo, hi = ttl/2, 2*ttl
			}
		}
		t.Latency = between(s.r, lo, hi)
		if aim == AimInFlight {
			t.Direction = proxy.Downstream // the answer arrives late
		}
		if p.direction != "" {
			t.Direction = p.direction
		}
		// Long enough for a request and its answer to cross, late.
		d = max(d, 2*(t.Latency+t.Jitter)+ttl/2)
	case FaultStall:
		t.Kind = proxy.Stall
	case FaultReset:
		t.Kind, d = proxy.Reset, scaled(s.r, ttl, 0.5, 1)
	case FaultBandwidth:
		t.Kind, t.RateKB = proxy.Bandwidth, p.rateLo+s.r.Int64N(p.rateHi-p.rateLo+1)
	case FaultLoss:
		t.Kind, t.Share = proxy.Loss, p.share
	}
	// As the schedule records them (dur): a replay strikes the same.
	t.Latency, t.Jitter = t.Latency.Round(time.Millisecond), t.Jitter.Round(time.Millisecond)
	return t, d.Round(time.Millisecond)
}

// begin records pl's strike, puts its toxic on links and, in the
// background, proves it in effect, holds it for pl's length (less when
// missed, asked once the proof is in, says it missed its aim), takes it
// off, records the end and frees the slot.
func (s *striker) begin(target string, client int, pl speedPlan, links []*proxy.Link, missed func() bool) {
	t, d := pl.t, pl.d
	detail := fmt.Sprintf("%s for %s", describe(t), d.Round(time.Millisecond))
	if aim := aimOf(pl.rule); aim != "" {
		detail = aim + ": " + detail
	}
	var held time.Duration // the least hold of each answer
	if t.Kind == proxy.Delay && t.Direction != proxy.Upstream {
		held = max(t.Latency-t.Jitter, 0)
	}
	end := heldFault(s.env, s.enter(pl), target, client, detail, held)
	remove, err := s.env.Links.Apply(links, t)
	if err != nil {
		end("failed: " + err.Error())
		s.failed(err)
		s.done()
		return
	}
	go func() {
		defer s.done()
		t0 := time.Now()
		perr := s.prove(links[0], t, d)
		stoodDown := perr == nil && missed != nil && missed() && s.ctx.Err() == nil
		if perr == nil && !stoodDown {
			sleep.For(s.ctx, d-time.Since(t0))
		}
		// The end is recorded as the healing begins: an answer held back
		// when the toxic goes comes out at once, after the end (the
		// checker counts on every answer that arrived before the end
		// having been held back in full).
		switch {
		case perr != nil:
			end("failed: " + perr.Error())
			s.failed(perr)
		case stoodDown:
			end("healed early: the acquire it was aimed at was not granted")
			s.mu.Lock()
			s.soon = true
			s.mu.Unlock()
		default:
			end("healed")
		}
		s.heal(target, remove)
	}()
}

// heal takes a strike's toxic off. One that stays on leaves the link
// slow (or stalled) after the history says it healed: what follows is not
// what was recorded, so the run ends with an error, never a verdict.
func (s *striker) heal(target string, remove func() error) {
	if err := remove(); err != nil {
		err = fmt.Errorf("%s on %s: heal failed: %w", s.fault, target, err)
		note(s.env, err.Error())
		s.failed(err)
	}
}

// failed ends the run: a strike that could not be made or proved.
func (s *striker) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal == nil {
		s.fatal = err
		s.stop()
	}
}

// describe says what a toxic does, for the history.
func describe(t proxy.Toxic) string {
	way := map[proxy.Direction]string{proxy.Both: "both ways", proxy.Upstream: "on the requests", proxy.Downstream: "on the answers"}[t.Direction]
	switch t.Kind {
	case proxy.Delay:
		if t.Jitter > 0 {
			return fmt.Sprintf("delay %s±%s %s", t.Latency.Round(time.Millisecond), t.Jitter.Round(time.Millisecond), way)
		}
		return fmt.Sprintf("delay %s %s", t.Latency.Round(time.Millisecond), way)
	case proxy.Stall:
		return "stall " + way
	case proxy.Reset:
		return "reset " + way
	case proxy.Bandwidth:
		return fmt.Sprintf("bandwidth %d KB/s %s", t.RateKB, way)
	case proxy.Loss:
		return fmt.Sprintf("loss %.0f%% %s", 100*t.Share, way)
	}
	return string(t.Kind)
}

func linkServers(links []*proxy.Link) string {
	names := make([]string, len(links))
	for i, l := range links {
		names[i] = l.Server.Name
	}
	return strings.Join(names, ",")
}
