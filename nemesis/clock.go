package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/protocol"
	"github.com/locktest/locktest/workloads"
)

// clock jumps server wall clocks forward right after a grant, aimed where it
// hurts: it shifts just enough of the servers that granted the current lease
// for another client to be able to win a majority without them (one server
// for a single Redis; for Redlock, 1 when the lease has a bare majority, 3
// when all 5 granted). The clocks jump back when the fault ends.
type clock struct{}

func (*clock) Name() string { return "clock" }

// ParseClockDirections reads the clock param: the directions a clock jump
// takes, "forward" (the default: leases expire early, the jump that hurts),
// "back" (they expire late: availability) or both, comma separated, each
// jump drawing one.
func ParseClockDirections(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return []int{1}, nil
	}
	var out []int
	for _, d := range strings.Split(s, ",") {
		switch strings.TrimSpace(d) {
		case "forward":
			out = append(out, 1)
		case "back":
			out = append(out, -1)
		default:
			return nil, fmt.Errorf("--param clock=%s: want forward, back or forward,back", s)
		}
	}
	return out, nil
}

func (*clock) Run(ctx context.Context, env *Env) error {
	c := &clockRun{env: env, ctx: ctx, r: rng(env, "clock"), nodes: env.Cluster.Nodes(), byAddr: map[string]clusters.Node{}, failed: make(chan struct{})}
	c.dirs = env.Settings.ClockDirections()
	for _, n := range c.nodes {
		if _, ok := n.(clusters.ClockShifter); !ok {
			return fmt.Errorf("%s cannot shift its clock", n.Name())
		}
		c.byAddr[n.Addr()] = n
	}
	c.next = time.Now().Add(between(c.r, 500*time.Millisecond, time.Second))
	env.Workload.OnAcquire(c.strike)
	select {
	case <-ctx.Done():
	case <-c.failed: // no need to wait for the time limit
	}
	shut(&c.mu, &c.closed, &c.wg)
	return c.fatal
}

// clockRun is one run of the clock fault: one shift at a time, struck
// right after a grant (OnAcquire).
type clockRun struct {
	env    *Env
	ctx    context.Context
	nodes  []clusters.Node
	byAddr map[string]clusters.Node
	dirs   []int         // the directions a jump may take (ParseClockDirections)
	failed chan struct{} // closed when a shift did not take effect
	wg     sync.WaitGroup

	mu     sync.Mutex
	r      *rand.Rand // drawn from under mu (the hook runs in the workload)
	busy   bool       // a shift is in effect
	closed bool       // the run is ending
	fatal  error      // a shift that did not take effect: the run fails
	next   time.Time  // no shift before
}

// clockShift is one shift, drawn or replayed.
type clockShift struct {
	strike
	targets []clusters.Node
	jump    time.Duration // the offset
	d, cool time.Duration // how long it lasts, and the pause after it
}

// strike (OnAcquire) shifts the clocks of just enough of the servers that
// granted p's lock for another client to win a majority, when a shift is
// due, and sets them back in the background.
func (c *clockRun) strike(p *workloads.Process) {
	sh, ok := c.draw(p)
	if !ok {
		return
	}
	var names []string
	for _, n := range sh.targets {
		names = append(names, n.Name())
	}
	// Recorded first: the fault is in effect from the first shift on.
	end := fault(c.env, sh.strike, strings.Join(names, ","), 0, fmt.Sprintf("wall clock %s right after client %d's grant", signed(sh.jump), p.ID))
	shiftErr := shiftAll(sh.targets, sh.jump)
	go c.hold(sh, shiftErr, end)
}

// draw takes the shift slot and draws the next shift, when one is due
// (in a replay: when the next entry's trigger came).
func (c *clockRun) draw(p *workloads.Process) (clockShift, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	replay := c.env.replaying()
	if c.closed || c.busy || c.fatal != nil || (!replay && time.Now().Before(c.next)) {
		return clockShift{}, false
	}
	var next strike
	if replay {
		var ok bool
		if next, ok = c.env.next("clock"); !ok || !c.env.came(next.Trigger, p.GrantNo()) {
			return clockShift{}, false
		}
	}
	granted := c.nodes
	if g := p.Grant().Nodes; len(g) > 0 {
		granted = nil
		for _, a := range g {
			if n, ok := c.byAddr[a]; ok {
				granted = append(granted, n)
			}
		}
	}
	k := max(1, len(c.nodes)/2+1-(len(c.nodes)-len(granted)))
	if k > len(granted) {
		return clockShift{}, false
	}
	var sh clockShift
	for _, i := range c.r.Perm(len(granted))[:k] {
		sh.targets = append(sh.targets, granted[i])
	}
	if replay {
		c.env.take(next, p.GrantNo())
		sh.strike = next
		sh.jump, _ = time.ParseDuration(next.Params["jump"])
		sh.d = next.lengthOf()
	} else {
		sh.jump = scaled(c.r, c.env.TTL, 1, 3).Round(time.Millisecond) * time.Duration(c.dirs[c.r.IntN(len(c.dirs))])
		sh.d = scaled(c.r, c.env.TTL, 1.5, 3).Round(time.Millisecond)
		sh.cool = scaled(c.r, c.env.TTL, 1, 2)
		sh.strike = c.env.drawn(Entry{Nemesis: "clock", Trigger: afterGrant(p.GrantNo()), Target: RuleGranters, Length: dur(sh.d),
			Params: map[string]string{"jump": signed(sh.jump)}})
	}
	c.busy = true
	c.wg.Add(1)
	return sh, true
}

// hold checks that the shift took effect, keeps it sh.d, sets the clocks
// back, ends the fault and frees the slot.
func (c *clockRun) hold(sh clockShift, err error, end func(string)) {
	defer c.wg.Done()
	if err == nil {
		if err = checkShift(c.ctx, sh.targets, sh.jump); err != nil {
			c.mu.Lock()
			if c.fatal == nil {
				c.fatal = err
				close(c.failed)
			}
			c.mu.Unlock()
		}
	}
	if err == nil {
		sleep.For(c.ctx, sh.d)
	}
	resetErr := shiftAll(sh.targets, 0)
	switch {
	case err != nil:
		// A fault that shifted nothing did not strike (the checker reads
		// "failed").
		end("failed: " + err.Error())
	case resetErr != nil:
		end("reset failed: " + resetErr.Error())
	default:
		end("clocks back to real time")
	}
	c.mu.Lock()
	c.busy = false
	c.next = time.Now().Add(sh.cool)
	c.mu.Unlock()
}

// shiftAll sets the clocks of nodes (every one a clusters.ClockShifter) to
// real time + offset.
func shiftAll(nodes []clusters.Node, offset time.Duration) error {
	var errs []error
	for _, n := range nodes {
		errs = append(errs, n.(clusters.ClockShifter).ShiftClock(offset))
	}
	return errors.Join(errs...)
}

// checkShift reads the clocks of the targets that can tell theirs and says
// which did not move by about jump: the shim is not in effect there, and
// the run must not pass such a fault for one that struck. The server read
// its clock somewhere between the request and the reply, so only a reading
// more than half the jump outside that window counts; a read that took
// longer than that, or failed (a partitioned or frozen server), proves
// nothing and is not held against the shift.
func checkShift(ctx context.Context, targets []clusters.Node, jump time.Duration) error {
	for _, n := range targets {
		cr, ok := n.(clusters.ClockReader)
		if !ok {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		t0 := time.Now()
		now, err := cr.ReadClock(rctx)
		t1 := time.Now()
		cancel()
		tol := jump.Abs() / 2
		if err != nil || t1.Sub(t0) > tol {
			continue
		}
		if now.Before(t0.Add(jump-tol)) || now.After(t1.Add(jump+tol)) {
			skew := now.Sub(t0.Add(t1.Sub(t0) / 2)).Round(time.Millisecond)
			return fmt.Errorf("%w: %s's clock read %s off real time after a jump of %s (libfaketime not preloaded there, or its offset file not found)",
				ErrClockNotShifted, n.Name(), signed(skew), signed(jump))
		}
	}
	return nil
}

// ErrClockNotShifted: a server's clock did not follow the clock shim.
var ErrClockNotShifted = errors.New("the clock shim did not take effect")

// clockClient turns the holder's own clock back right after it acquires, so
// a client that checks its lease's validity believes it longer than the
// servers keep it. The clock is set right again before the client's next
// acquire (in the client's own loop, so no request races another).
type clockClient struct{}

func (*clockClient) Name() string { return "clock-client" }

func (*clockClient) Run(ctx context.Context, env *Env) error {
	r := rng(env, "clock-client")
	var mu sync.Mutex
	skewed := map[int]func(string){} // client -> records the fault's end
	next := time.Now().Add(between(r, 500*time.Millisecond, time.Second))
	closed := false
	env.Workload.OnAcquire(func(p *workloads.Process) {
		mu.Lock()
		if closed || len(skewed) > 0 || (!env.replaying() && time.Now().Before(next)) {
			mu.Unlock()
			return
		}
		s, ok := clientSkew(env, r, p.GrantNo())
		if !ok {
			mu.Unlock()
			return
		}
		back := s.lengthOf()
		next = time.Now().Add(scaled(r, env.TTL, 2, 4))
		mu.Unlock()
		rep, err := p.Do(protocol.OpClock, "", 5*time.Second, back.Milliseconds()*-1)
		if err != nil || rep.Outcome != string(history.OK) {
			return // a client may not support clock skew
		}
		end := fault(env, s, clientTarget(p.ID), p.ID, fmt.Sprintf("client clock -%s right after its grant", back))
		mu.Lock()
		skewed[p.ID] = end
		mu.Unlock()
	})
	heal := func(p *workloads.Process) {
		mu.Lock()
		end, ok := skewed[p.ID]
		delete(skewed, p.ID)
		mu.Unlock()
		if !ok {
			return
		}
		_, err := p.Do(protocol.OpClock, "", 5*time.Second, 0)
		detail := "client clock back to real time"
		if err != nil {
			detail = "reset failed: " + err.Error()
		}
		end(detail)
	}
	env.Workload.OnInvoke(func(p *workloads.Process, op history.Op) {
		if op == history.Acquire {
			heal(p)
		}
	})
	<-ctx.Done()
	mu.Lock()
	closed = true
	left := skewed
	skewed = map[int]func(string){}
	mu.Unlock()
	// A client still skewed when the run ends is set right by its exit;
	// record the end of the fault.
	for _, end := range left {
		end("run ended")
	}
	return nil
}

// clientSkew is the next skew of clock-client at grant number grant: drawn
// (its length is how far the clock goes back), or in a replay the next
// entry once its trigger came.
func clientSkew(env *Env, r *rand.Rand, grant int64) (strike, bool) {
	if env.replaying() {
		return env.dueAt("clock-client", grant)
	}
	back := scaled(r, env.TTL, 1, 3)
	return env.drawn(Entry{Nemesis: "clock-client", Trigger: afterGrant(grant), Target: RuleHolder, Length: dur(back)}), true
}

// signed renders d with its sign: "+2s", "-1.5s".
func signed(d time.Duration) string {
	if d > 0 {
		return "+" + d.String()
	}
	return d.String()
}
