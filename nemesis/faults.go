package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
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
// new round when the last one is done.
func (f *clientFault) want(p *workloads.Process) string {
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

// ready reports whether a fault may strike now (under f.mu).
func (f *clientFault) ready() bool {
	return !f.closed && !f.busy && !time.Now().Before(f.next)
}

// afterGrant strikes the holder right after its acquire answered ok.
func (f *clientFault) afterGrant(p *workloads.Process) {
	f.mu.Lock()
	if !f.ready() || f.want(p) != locks.PointAfterGrant || !f.hurts(p) {
		f.mu.Unlock()
		return
	}
	if f.crash {
		// The whole crash runs under the lock run takes before it
		// returns: no crash starts after run returned.
		defer f.mu.Unlock()
		end := faultAt(f.env, f.name, p.ID, locks.PointAfterGrant, "SIGKILL while holding the lock")
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
	d := scaled(f.r, f.env.TTL, f.lo, f.hi)
	end := faultAt(f.env, f.name, p.ID, locks.PointAfterGrant, fmt.Sprintf("SIGSTOP for %s", d.Round(time.Millisecond)))
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
	if !f.ready() || f.want(p) != locks.PointWaiting || f.env.Workload.Holders() == 0 {
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
		d := scaled(f.r, f.env.TTL, f.lo, f.hi)
		end := faultAt(f.env, f.name, p.ID, locks.PointWaiting, fmt.Sprintf("SIGSTOP of a waiter for %s", d.Round(time.Millisecond)))
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
	want := f.want(p)
	for _, pt := range p.Points() {
		if pt.Name == want && pt.Op == string(op) {
			f.busy = true
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
	if f.misses >= maxMisses && time.Since(f.missSince) > missTTLs*f.env.TTL && len(f.round) > 0 && f.round[0] == point {
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
	f.mu.Unlock()
	if crash {
		end := faultAt(f.env, f.name, p.ID, point, fmt.Sprintf("crashed itself at %s (SIGKILL)", point))
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
	d := scaled(f.r, f.env.TTL, f.lo, f.hi)
	end := faultAt(f.env, f.name, p.ID, point, fmt.Sprintf("stopped itself at %s (SIGSTOP) for %s", point, d.Round(time.Millisecond)))
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

func (*pauseServer) Run(ctx context.Context, env *Env) error {
	r := rng(env, "pause-server")
	nodes := env.Cluster.Nodes()
	param := env.Settings.PauseServer
	grants := grantSignal(env)
	for sleep.For(ctx, between(r, time.Second, 3*time.Second)) {
		// Freeze right after a grant (as kill strikes): a server frozen
		// while the lock is held is the case that tests the lock; one
		// frozen while nobody held it proves nothing. The leader, when
		// that is the target, is found first (asking an ensemble takes
		// longer than a short hold); any other target after the grant,
		// among the servers that granted it (Redlock).
		var n clusters.Node
		if param == "leader" {
			var err error
			if n, err = target(ctx, env, r, nodes, param); err != nil {
				if ctx.Err() != nil {
					return nil // the run ended while an election was under way
				}
				return err
			}
		}
		waitForGrant(ctx, env, grants, 2*env.TTL)
		if ctx.Err() != nil {
			return nil
		}
		if n == nil {
			var err error
			if n, err = target(ctx, env, r, nodes, param); err != nil {
				return err
			}
		}
		d := scaled(r, env.TTL, 0.5, 2)
		n, release := claimTurn(ctx, env, r, nodes, n, param)
		if release == nil {
			continue
		}
		how := pauseHow(n)
		// Recorded as the pause is sent (docker pause takes a while).
		end := fault(env, "pause-server", n.Name(), 0, fmt.Sprintf("%s for %s", how[0], d.Round(time.Millisecond)))
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
		err := n.Resume()
		end(how[1])
		release()
		if err != nil {
			return err
		}
	}
	return nil
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
func claimTurn(ctx context.Context, env *Env, r *rand.Rand, nodes []clusters.Node, n clusters.Node, param string) (clusters.Node, func()) {
	release, holder, ok := env.claimNode(n.Name(), "pause-server")
	if ok {
		return n, release
	}
	if param != "leader" {
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

func (*killServer) Run(ctx context.Context, env *Env) error {
	r := rng(env, "kill")
	nodes := env.Cluster.Nodes()
	grants := grantSignal(env)
	for sleep.For(ctx, between(r, time.Second, 3*time.Second)) {
		victims, err := killVictims(ctx, env, r, nodes, grants)
		if err != nil {
			if ctx.Err() != nil {
				return nil // the run ended (while an election was under way)
			}
			return err
		}
		down := between(r, 300*time.Millisecond, time.Second)
		release, ok := claimNodes(env, "kill", victims)
		if !ok {
			continue
		}
		err = strike(ctx, env, victims, down)
		release()
		if err != nil {
			return err
		}
	}
	return nil
}

// killVictims picks the servers the next kill hits, right after a grant:
// a server that forgets the lock while its holder has most of its hold
// still ahead hurts most (the killed servers come back before the holder
// is done). The leader, when that is the target, is found before the
// grant: asking the ensemble takes longer than a short hold.
func killVictims(ctx context.Context, env *Env, r *rand.Rand, nodes []clusters.Node, grants chan struct{}) ([]clusters.Node, error) {
	var leader clusters.Node
	if env.Settings.Kill == "leader" {
		var err error
		if leader, err = target(ctx, env, r, nodes, "leader"); err != nil {
			return nil, err
		}
	}
	waitForGrant(ctx, env, grants, 2*env.TTL)
	if leader != nil {
		return []clusters.Node{leader}, nil
	}
	return killTargets(ctx, env, r, nodes)
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

// strike kills victims at once, keeps them down for down and restarts
// them, recording the kill as one fault.
func strike(ctx context.Context, env *Env, victims []clusters.Node, down time.Duration) error {
	names := make([]string, 0, len(victims))
	for _, n := range victims {
		names = append(names, n.Name())
	}
	// Recorded as the kill is sent: on some backends it takes a while to
	// land (docker kill: 50-300 ms).
	end := fault(env, "kill", strings.Join(names, ","), 0, killDetail(env, victims, down))
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

// killTargets picks the servers a kill hits. When the current holder's
// grant names the servers that granted it (Redlock), just enough of those
// for another client to be able to win a majority once they come back
// empty (1 when the grant had a bare majority, 3 when all 5 granted);
// otherwise one server, as target picks it (--param kill=leader is
// resolved by the caller).
func killTargets(ctx context.Context, env *Env, r *rand.Rand, nodes []clusters.Node) ([]clusters.Node, error) {
	if g := granting(env, nodes); len(g) > 0 {
		k := max(1, len(nodes)/2+1-(len(nodes)-len(g)))
		if k <= len(g) {
			order := r.Perm(len(g))
			out := make([]clusters.Node, 0, k)
			for _, i := range order[:k] {
				out = append(out, g[i])
			}
			slices.SortFunc(out, func(a, b clusters.Node) int { return strings.Compare(a.Name(), b.Name()) })
			return out, nil
		}
	}
	n, err := target(ctx, env, r, nodes, "")
	if err != nil {
		return nil, err
	}
	return []clusters.Node{n}, nil
}

// target picks the server a server fault hits: one of the servers that
// granted the current holder's lock when the grant names them (Redlock's
// majority: a restarted or frozen member lets a second majority form), a
// random one otherwise, or with --param kill=leader (pause-server=leader)
// the current leader of a topology that elects one (clusters.Leader).
func target(ctx context.Context, env *Env, r *rand.Rand, nodes []clusters.Node, param string) (clusters.Node, error) {
	n := nodes[r.IntN(len(nodes))]
	if param != "leader" {
		if g := granting(env, nodes); len(g) > 0 && len(g) < len(nodes) {
			n = g[r.IntN(len(g))]
		}
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
// holds the lock then (or as soon as somebody does), or when ctx ends.
func waitForGrant(ctx context.Context, env *Env, grants chan struct{}, limit time.Duration) {
	if grants == nil {
		return
	}
	select {
	case <-grants: // a grant from before: stale
	default:
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-grants:
		return
	case <-ctx.Done():
		return
	case <-timer.C:
	}
	for env.Workload.Holders() == 0 && sleep.For(ctx, 5*time.Millisecond) {
		select {
		case <-grants:
			return
		default:
		}
	}
}
