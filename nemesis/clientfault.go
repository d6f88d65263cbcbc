package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/sleep"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/protocol"
	"github.com/locktest/locktest/workloads"
)

// pause freezes the lock holder right after it acquires, for longer than
// its lease, then lets it go on believing it still holds the lock. With
// --wait it also freezes a client blocked in acquire (a waiter);
// --param pause-at=POINT,... chooses the points (after-grant, waiting, the
// scheme's gaps).
type pause struct{}

func (*pause) Name() string { return "pause" }

// ParsePause reads the pause param, "LO..HI": pause lengths as multiples of
// the TTL (default 1.5..3, longer than the lease; e.g. 0.1..0.3 for pauses a
// lease renewal should survive).
func ParsePause(s string) (lo, hi float64, err error) {
	if strings.TrimSpace(s) == "" {
		return 1.5, 3, nil
	}
	a, b, found := strings.Cut(s, "..")
	if !found {
		b = a
	}
	lo, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	hi, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("%q: want LO..HI, multiples of the TTL (e.g. 0.1..0.3)", s)
	case lo <= 0 || hi < lo || hi > 20:
		return 0, 0, fmt.Errorf("%q: want 0 < LO <= HI <= 20", s)
	}
	return lo, hi, nil
}

func (*pause) Run(ctx context.Context, env *Env) error {
	lo, hi := env.Settings.PauseLengths()
	f := &clientFault{env: env, ctx: ctx, r: rng(env, "pause"), name: "pause", at: env.Settings.PauseAt, lo: lo, hi: hi}
	return f.run()
}

// crashClient kills the lock holder right after it acquires, or makes a
// client crash itself at one of its fault points.
type crashClient struct{}

func (*crashClient) Name() string { return "crash-client" }

func (*crashClient) Run(ctx context.Context, env *Env) error {
	f := &clientFault{env: env, ctx: ctx, r: rng(env, "crash-client"), name: "crash-client", crash: true, at: env.Settings.CrashAt}
	return f.run()
}

// ParsePoints reads a pause-at or crash-at param: a comma-separated list of
// fault points (locks.PointAfterGrant, or points the clients declare); nil
// when empty (every point the clients have, and after-grant).
func ParsePoints(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("point %q given twice", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// clientFault is a fault on one client at a time (pause, crash-client),
// aimed at a fault point: right after a grant (the controller stops or
// kills the holder as its acquire answers ok) or a gap inside the client's
// own steps, where the client stops itself when the request asks it to
// (workloads.Stopper). The point of each fault is drawn by the seed, in
// rounds: every round strikes each point once, in a seeded order, so a
// short run strikes every gap as well as the grant.
type clientFault struct {
	env    *Env
	ctx    context.Context
	r      *rand.Rand
	name   string
	crash  bool
	at     []string // the points to strike (--param pause-at / crash-at); nil: all
	lo, hi float64  // pause lengths, multiples of the TTL

	mu           sync.Mutex
	wg           sync.WaitGroup
	busy, closed bool
	next         time.Time
	round        []string  // the points still to strike in this round, next first
	misses       int       // requests in a row that never reached the point wanted
	missSince    time.Time // when the first of them was sent
	armedAt      int64     // the run's grants when the request in flight was armed
}

func (f *clientFault) run() error {
	f.next = time.Now().Add(between(f.r, 500*time.Millisecond, time.Second))
	f.env.Workload.OnAcquire(f.afterGrant)
	f.env.Workload.AddStopper(f)
	if f.env.Wait && !f.crash {
		f.env.Workload.OnInvoke(f.waiting)
	}
	<-f.ctx.Done()
	shut(&f.mu, &f.closed, &f.wg)
	return nil
}

// want returns the point the next fault strikes (under f.mu), drawing a
// new round when the last one is done; in a replay, the point of the next
// entry once its trigger came at opportunity grant, else "".
func (f *clientFault) want(p *workloads.Process, grant int64) string {
	if f.env.replaying() {
		s, ok := f.env.next(f.name)
		if !ok || !f.env.came(s.Trigger, grant) {
			return ""
		}
		return s.Point
	}
	if len(f.round) == 0 {
		points := f.at
		if points == nil {
			points = []string{locks.PointAfterGrant}
			if f.env.Wait && !f.crash {
				points = append(points, locks.PointWaiting)
			}
			how := protocol.StopPause
			if f.crash {
				how = protocol.StopCrash
			}
			for _, pt := range p.Points() {
				// By default only where this kind of stop can hurt.
				if len(pt.Stops) == 0 || slices.Contains(pt.Stops, how) {
					points = append(points, pt.Name)
				}
			}
		}
		f.round = f.order(points)
	}
	return f.round[0]
}

// order puts a round's points in a seeded order. A crash strikes the
// scheme's gaps first (in a seeded order among them), after-grant last: a
// crash right after the grant is what a lease's expiry is made for, while
// a crash in a gap (after-setnx, before EXPIRE) may leave the lock taken
// for good, which the checker can only call a deadlock once the lock has
// stayed taken for its threshold (two TTLs and a second): struck first,
// it is found by a short run too, not only by one long enough for the
// cool-down of a crash after the grant to pass before it.
func (f *clientFault) order(points []string) []string {
	out := make([]string, 0, len(points))
	for _, i := range f.r.Perm(len(points)) {
		out = append(out, points[i])
	}
	if f.crash {
		// Stable: the seeded order stays among the gaps.
		slices.SortStableFunc(out, func(a, b string) int {
			return boolInt(a == locks.PointAfterGrant) - boolInt(b == locks.PointAfterGrant)
		})
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ready reports whether a fault may strike now (under f.mu); in a replay
// the entries' triggers say when, not the cool-down.
func (f *clientFault) ready() bool {
	return !f.closed && !f.busy && (f.env.replaying() || !time.Now().Before(f.next))
}

// plan is the strike of the fault about to begin at point, hitting a
// client by rule, at opportunity grant: drawn (its length from the seed),
// or in a replay the entry want saw, taken.
func (f *clientFault) plan(grant int64, point string, rule Rule) strike {
	if f.env.replaying() {
		s, _ := f.env.next(f.name)
		f.env.take(s, grant)
		return s
	}
	var d time.Duration
	if !f.crash {
		d = scaled(f.r, f.env.TTL, f.lo, f.hi)
	}
	return f.env.drawn(Entry{Nemesis: f.name, Trigger: f.env.triggerAt(grant), Target: rule, Length: dur(d), Point: point})
}

// afterGrant strikes the holder right after its acquire answered ok.
func (f *clientFault) afterGrant(p *workloads.Process) {
	f.mu.Lock()
	grant := p.GrantNo()
	if !f.ready() || f.want(p, grant) != locks.PointAfterGrant || !f.hurts(p) {
		f.mu.Unlock()
		return
	}
	if f.crash {
		// The whole crash runs under the lock run takes before it
		// returns: no crash starts after run returned.
		defer f.mu.Unlock()
		end := fault(f.env, f.plan(grant, locks.PointAfterGrant, RuleHolder), clientTarget(p.ID), p.ID, "SIGKILL while holding the lock")
		p.Kill()
		end("process gone")
		f.struckLocked()
		return
	}
	f.busy = true
	// Added under the lock that run takes before it waits: a pause begun
	// here is always healed before run returns.
	f.wg.Add(1)
	f.mu.Unlock()
	if err := p.Pause(); err != nil {
		f.standDown()
		return
	}
	s := f.plan(grant, locks.PointAfterGrant, RuleHolder)
	d := s.lengthOf()
	end := fault(f.env, s, clientTarget(p.ID), p.ID, fmt.Sprintf("SIGSTOP for %s", d))
	go f.hold(p, d, end)
}

// hurts reports whether freezing p right after its grant can break the
// lock (under f.mu). On a read-write lock (zk-rw) a pause aims at a
// writer: a frozen reader shares the lock with the readers that keep
// coming, and a writer's try rarely finds none of them ahead of it, so a
// frozen reader seldom overlaps anyone it excludes; a frozen writer
// overlaps the first holder granted once its session is gone. Writers are
// the fewer grants: when none came for readerAfter TTLs past the time the
// pause was due, a reader is frozen after all, so the fault still strikes.
func (f *clientFault) hurts(p *workloads.Process) bool {
	return f.crash || !f.env.Workload.ReadWrite() || hurtsShared(p.Grant().Mode, time.Since(f.next), f.env.TTL)
}

// hurtsShared reports whether a pause of a holder granted the lock in mode
// on a read-write lock, overdue past the time the pause was due, is one to
// strike: a writer's grant always, a reader's once no writer came for
// readerAfter TTLs.
func hurtsShared(mode string, overdue, ttl time.Duration) bool {
	return mode != history.ModeRead || overdue > readerAfter*ttl
}

// readerAfter is how many TTLs past its due time a pause on a read-write
// lock waits for a writer's grant before it freezes a reader.
const readerAfter = 1

// waitingGrace is how long an acquire must have waited before a waiter
// fault freezes its client: long enough that it is blocked (a blocking
// acquire's retry, a watch on its predecessor), not on its first try.
const waitingGrace = 150 * time.Millisecond

// waiting strikes a waiter: a client whose blocking acquire (--wait) is
// sent while another client holds the lock, still waiting waitingGrace
// later, is frozen for the fault's length (its session or lease runs out
// while it waits; a recipe that does not look again hands it the lock).
func (f *clientFault) waiting(p *workloads.Process, op history.Op) {
	if op != history.Acquire {
		return
	}
	f.mu.Lock()
	grant := f.env.Workload.Grants()
	if !f.ready() || f.want(p, grant) != locks.PointWaiting || f.env.Workload.Holders() == 0 {
		f.mu.Unlock()
		return
	}
	f.busy = true
	f.wg.Add(1)
	f.mu.Unlock()
	// The request is sent right after this hook: its id is the next.
	id := p.LastRequest() + 1
	go func() {
		// Granted or refused at once: not a waiter.
		if !sleep.For(f.ctx, waitingGrace) || p.InFlight() != id || p.Pause() != nil {
			f.standDown()
			return
		}
		s := f.plan(grant, locks.PointWaiting, RuleWaiter)
		d := s.lengthOf()
		end := fault(f.env, s, clientTarget(p.ID), p.ID, fmt.Sprintf("SIGSTOP of a waiter for %s", d))
		f.hold(p, d, end)
	}()
}

// Arm implements workloads.Stopper: it asks for a stop at the point this
// fault wants next, when that point lies in op.
func (f *clientFault) Arm(p *workloads.Process, op history.Op) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready() {
		return "", false
	}
	grant := f.env.Workload.Grants()
	want := f.want(p, grant)
	for _, pt := range p.Points() {
		if pt.Name == want && pt.Op == string(op) {
			f.busy, f.armedAt = true, grant
			return want, f.crash
		}
	}
	return "", false
}

// Missed implements workloads.Stopper: the client never got to the point
// (its check failed, its SETNX was refused): the next request may.
func (f *clientFault) Missed(_ *workloads.Process, point string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy = false
	if f.misses == 0 {
		f.missSince = time.Now()
	}
	f.misses++
	if f.misses < maxMisses || time.Since(f.missSince) <= missTTLs*f.env.TTL {
		return
	}
	if s, ok := f.env.next(f.name); ok && f.env.replaying() && s.Point == point {
		f.env.skip(s, fmt.Sprintf("%d requests asked to stop at %s in %s never reached it", f.misses, point, time.Since(f.missSince).Round(time.Millisecond)))
		f.misses = 0
		return
	}
	if len(f.round) > 0 && f.round[0] == point {
		// A point the clients never reach (a check that always fails)
		// must not hold the other points back: on to the next.
		note(f.env, fmt.Sprintf("%s skipped %s: %d requests asked to stop there in %s never reached it", f.name, point, f.misses, time.Since(f.missSince).Round(time.Millisecond)))
		f.round, f.misses = f.round[1:], 0
	}
}

// maxMisses is how many requests in a row, over more than missTTLs TTLs,
// may miss the point a client fault wants before it moves on to the next
// point of its round. Both: under contention most requests miss a point
// that lies behind a grant (after-setnx: only a SETNX that wins gets
// there), ten of them within a few hundred milliseconds, though the point
// is reached with the next grants.
const (
	maxMisses = 10
	missTTLs  = 2
)

// Stopped implements workloads.Stopper: the client stopped itself at
// point. A paused one is resumed after the fault's length (at once when
// the run is ending); a crashed one's fault ends when its process is gone.
func (f *clientFault) Stopped(p *workloads.Process, point string, crash bool) {
	f.mu.Lock()
	closed := f.closed
	if !closed {
		f.wg.Add(1)
	}
	s := f.plan(f.armedAt, point, RuleAnyClient)
	f.mu.Unlock()
	if crash {
		end := fault(f.env, s, clientTarget(p.ID), p.ID, fmt.Sprintf("crashed itself at %s (SIGKILL)", point))
		wait := func() {
			select {
			case <-p.Exited():
				end("process gone")
			case <-time.After(5 * time.Second):
				p.Kill()
				end("process gone (killed after 5 s)")
			}
		}
		if closed {
			wait()
			return
		}
		go func() {
			wait()
			f.struck()
			f.wg.Done()
		}()
		return
	}
	// It announced the stop just before raising SIGSTOP: the fault
	// begins once it is frozen.
	_ = p.WaitStopped(time.Second)
	d := s.lengthOf()
	end := fault(f.env, s, clientTarget(p.ID), p.ID, fmt.Sprintf("stopped itself at %s (SIGSTOP) for %s", point, d))
	if closed {
		_ = p.Resume()
		end("SIGCONT (run ending)")
		return
	}
	go f.hold(p, d, end)
}

// standDown ends a fault that struck nothing (the client could not be
// frozen, or was no waiter after all): the next one may strike at once.
func (f *clientFault) standDown() {
	f.mu.Lock()
	f.busy = false
	f.mu.Unlock()
	f.wg.Done()
}

// hold keeps p frozen for d (less when the run ends), then resumes it and
// ends the fault.
func (f *clientFault) hold(p *workloads.Process, d time.Duration, end func(string)) {
	defer f.wg.Done()
	detail := "SIGCONT"
	if !sleep.For(f.ctx, d) {
		detail = "SIGCONT (run ending)"
	}
	_ = p.Resume()
	end(detail)
	f.struck()
}

// struck ends a fault that struck: the next point of the round is next,
// after a cool-down.
func (f *clientFault) struck() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.struckLocked()
}

// struckLocked is struck under f.mu.
func (f *clientFault) struckLocked() {
	f.misses = 0
	if len(f.round) > 0 {
		f.round = f.round[1:]
	}
	f.busy = false
	if f.crash {
		f.next = time.Now().Add(scaled(f.r, f.env.TTL, 2, 4))
	} else {
		f.next = time.Now().Add(scaled(f.r, f.env.TTL, 0.5, 1.5))
	}
}
