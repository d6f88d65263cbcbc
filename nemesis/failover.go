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
	"github.com/locktest/locktest/workloads"
)

// failoverLimit bounds one FailPrimary or Rejoin.
const failoverLimit = 60 * time.Second

// failover makes the primary of a replicated topology fail right after a
// grant and gets a replica promoted, each in the topology's own way
// (clusters.Failoverer): the new primary may not have the grant, which is
// then lost while its holder goes on believing in it. The fault starts when
// the grant's holder is seen, a note records the promotion when it is done,
// and the fault ends when the old primary, down for 1-2 s, has rejoined as
// a replica of the new one. The next failover waits for a grant at least
// 1-2 s after that. A topology that cannot fail over is an error; a
// failover the topology does not finish (clusters.ErrNoPromotion: the
// primary failed, no replica was promoted) ends the fault without a
// promotion note once the old primary is the primary again, and the run
// goes on (its verdict says no failover promoted a replica); when the
// topology promotes a replica after all (clusters.LatePromoter, asked
// before and after the rejoin), a promotion note records it when seen.
//
// On a topology whose replica can be held back (a clusters.Lagger:
// mysql-replicated), the grant is one the replica has received but not
// applied: once a failover is due, the first acquire sent while nobody
// holds the lock waits until no other request awaits its answer (holding
// every other acquire back meanwhile), lets the replica catch up and then
// stops its applier, and the failover strikes after the first grant since,
// before its holder can release (the release would be lost too, and the
// promoted replica would have the lock free or held as before). A grant
// committed before the applier stopped is on the promoted replica; the
// promotion note says whether the replica lacked writes the primary had
// committed (history.PromotedLackingWrites, PromotedWithEveryWrite), and
// the checker reads it.
//
// --param failover=isolate (topologies that are a clusters.Isolator:
// redis-sentinel on the local backend) fails the primary by cutting it off
// the network instead of killing it: DROP rules in its namespace, healed
// when the fault ends, so the old primary comes back with its stale data
// and is demoted by the topology.
type failover struct{}

// Failover modes (--param failover=MODE).
const (
	FailoverKill    = "kill"
	FailoverIsolate = "isolate"
)

// ParseFailover reads the failover param ("" means kill).
func ParseFailover(s string) (string, error) {
	switch m := strings.TrimSpace(s); m {
	case "", FailoverKill:
		return FailoverKill, nil
	case FailoverIsolate:
		return m, nil
	}
	return "", fmt.Errorf("unknown failover mode %q (known: %s, %s)", s, FailoverKill, FailoverIsolate)
}

func (*failover) Name() string { return "failover" }

func (*failover) Run(ctx context.Context, env *Env) error {
	fo, ok := clusters.As[clusters.Failoverer](env.Cluster)
	if !ok {
		return fmt.Errorf("topology %s cannot fail over: it has no primary with a replica to promote", env.Cluster.Topology())
	}
	mode, _ := ParseFailover(env.Settings.Failover) // validated; "" is kill
	if s, ok := env.next("failover"); ok && env.replaying() {
		mode, _ = ParseFailover(s.Params["mode"]) // the replayed faults' mode (validated)
	}
	failPrimary, how, back := fo.FailPrimary, "fail", "; the old primary rejoined as a replica"
	if mode == FailoverIsolate {
		iso, ok := clusters.As[clusters.Isolator](env.Cluster)
		if !ok || env.Net == nil {
			return fmt.Errorf("failover=isolate: topology %s cannot isolate its primary (redis-sentinel with the network layer can)", env.Cluster.Topology())
		}
		failPrimary, how, back = iso.IsolatePrimary, "isolate", "; the old primary healed, came back with its stale data and rejoined as a replica"
	}
	f := &failoverRun{env: env, ctx: ctx, fo: fo, failPrimary: failPrimary, how: how, back: back, mode: mode, r: rng(env, "failover")}
	f.lag, _ = clusters.As[clusters.Lagger](env.Cluster)
	f.lp, _ = clusters.As[clusters.LatePromoter](env.Cluster)
	f.next = time.Now().Add(between(f.r, 500*time.Millisecond, time.Second))
	if f.lag != nil {
		env.Workload.OnInvoke(f.holdBack)
	}
	env.Workload.OnAcquire(f.strike)
	<-ctx.Done()
	shut(&f.mu, &f.closed, &f.wg)
	f.mu.Lock()
	f.resume() // held back for a grant that never came
	f.mu.Unlock()
	return f.firstErr
}

// failoverRun is one run of the failover fault: one failover at a time,
// begun right after a grant (OnAcquire).
type failoverRun struct {
	env         *Env
	ctx         context.Context
	fo          clusters.Failoverer
	failPrimary func(context.Context) (string, error) // FailPrimary, or IsolatePrimary
	how, back   string                                // what the fault's detail says
	mode        string                                // FailoverKill or FailoverIsolate
	wg          sync.WaitGroup

	lag clusters.Lagger       // nil: the replica cannot be held back
	lp  clusters.LatePromoter // nil: a promotion after FailPrimary gave up is not seen

	mu       sync.Mutex
	r        *rand.Rand // drawn from under mu (the hook runs in the workload)
	busy     bool       // a failover is under way (or the topology broke)
	closed   bool       // the run is ending
	firstErr error
	next     time.Time // no failover before
	held     bool      // the replica's applier is held back (lag)
}

// due reports whether a failover may strike after the next grant.
func (f *failoverRun) due() bool {
	if f.closed || f.busy {
		return false
	}
	if !f.env.replaying() {
		return !time.Now().Before(f.next)
	}
	s, ok := f.env.next("failover")
	return ok && f.env.came(s.Trigger, f.env.Workload.Grants()+1)
}

// holdBack (OnInvoke, on a Lagger) holds the replica back right before
// p's acquire is sent, when a failover is due and nobody holds the lock
// (no release is on its way either: a holder is one until its release has
// answered), so that the next grant is received by the replica but not
// applied. It first waits (up to holdBackQuiet) until no other client
// awaits an answer: an acquire on its way could be granted before the
// applier stops; if one is granted, the hold-back waits for the next free
// moment. Under mu: the other clients' acquires wait in this hook
// meanwhile, and are sent after the hold-back.
func (f *failoverRun) holdBack(p *workloads.Process, op history.Op) {
	if op != history.Acquire {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held || !f.due() || f.env.Workload.Holders() > 0 {
		return
	}
	quiet := time.Now().Add(holdBackQuiet)
	for f.othersInFlight(p) {
		if time.Now().After(quiet) || !sleep.For(f.ctx, time.Millisecond) {
			return
		}
	}
	if f.env.Workload.Holders() > 0 {
		return // an acquire on its way was granted
	}
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	if err := f.lag.HoldBackReplica(ctx); err != nil {
		if f.ctx.Err() == nil {
			f.busy = true // no more failovers on a broken topology
			if f.firstErr == nil {
				f.firstErr = fmt.Errorf("hold back the replica: %w", err)
			}
		}
		return
	}
	f.held = true
}

// holdBackQuiet bounds how long holdBack waits for the other clients'
// requests on their way to be answered.
const holdBackQuiet = 2 * time.Second

// othersInFlight reports whether a client other than p awaits an answer.
func (f *failoverRun) othersInFlight(p *workloads.Process) bool {
	for _, q := range f.env.Workload.Processes() {
		if q != p && q.InFlight() != 0 {
			return true
		}
	}
	return false
}

// resume lets a held-back replica apply again (under mu).
func (f *failoverRun) resume() {
	if !f.held {
		return
	}
	f.held = false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.lag.ResumeReplica(ctx); err != nil && f.firstErr == nil {
		f.busy = true
		f.firstErr = fmt.Errorf("resume the replica: %w", err)
	}
}

// strike (OnAcquire) fails the primary right after client p's grant, when
// a failover is due; the holder goes on while the topology fails over, as
// it would.
func (f *failoverRun) strike(p *workloads.Process) {
	f.mu.Lock()
	replay := f.env.replaying()
	if f.closed || f.busy || (!replay && time.Now().Before(f.next)) {
		f.mu.Unlock()
		return
	}
	lagged := f.lag != nil
	if lagged && !f.held {
		f.mu.Unlock()
		return // not held back yet: the next free moment does
	}
	var s strike
	var cool time.Duration
	if replay {
		var ok bool
		if s, ok = f.env.dueAt("failover", p.GrantNo()); !ok {
			f.mu.Unlock()
			return
		}
	} else {
		down := between(f.r, time.Second, 2*time.Second)
		cool = between(f.r, time.Second, 2*time.Second)
		s = f.env.drawn(Entry{Nemesis: "failover", Trigger: afterGrant(p.GrantNo()), Target: RulePrimary, Length: dur(down),
			Params: map[string]string{"mode": f.mode}})
	}
	f.busy = true
	f.held = false // the promotion ends the replication
	// Added under the lock that Run takes before it waits: a failover
	// begun here has rejoined before Run returns.
	f.wg.Add(1)
	f.mu.Unlock()
	what := fmt.Sprintf("%s the primary right after client %d's grant and promote a replica", f.how, p.ID)
	if lagged {
		what = fmt.Sprintf("%s the primary right after client %d's grant, the first since the replica's applier was held back, and promote the replica", f.how, p.ID)
	}
	end := fault(f.env, s, "primary", p.ID, what)
	go f.failover(p.ID, end, s.lengthOf(), cool)
}

// failover fails the primary, keeps it down for down, rejoins it and ends
// the fault; after a failure the topology takes no more failovers.
func (f *failoverRun) failover(client int, end func(string), down, cool time.Duration) {
	defer f.wg.Done()
	fctx, cancel := context.WithTimeout(context.Background(), failoverLimit)
	line, err := f.failPrimary(fctx)
	cancel()
	back := f.back
	if errors.Is(err, clusters.ErrNoPromotion) {
		// The primary failed and no replica was promoted: no grant was
		// lost to a promotion, which the run's verdict says (no promotion
		// note); the run goes on once the old primary is back.
		line = history.FailoverFailed + err.Error()
		f.env.Recorder.Record(history.Event{Type: history.Note, Client: client, Detail: line}, nil)
		back = "; the old primary restarted and rejoined the topology"
		if f.mode == FailoverIsolate {
			back = "; the old primary healed and rejoined the topology"
		}
	} else if err != nil {
		end(history.FailoverFailed + err.Error())
		f.fail(fmt.Errorf("fail primary: %w", err))
		return
	} else {
		if f.lag != nil {
			if f.lag.LostWrites() {
				line += "; " + history.PromotedLackingWrites
			} else {
				line += "; " + history.PromotedWithEveryWrite
			}
		}
		f.env.Recorder.Record(history.Event{Type: history.Note, Client: client, Detail: history.FailoverNote + line}, nil)
	}
	// Down for a while, even when the run is ending: the cluster is whole
	// again before Run returns.
	sleep.For(f.ctx, down)
	// After a failover the topology did not finish, a promotion seen
	// before the rejoin or after it (then the old primary, the primary
	// again, must rejoin once more, as the promoted replica's replica).
	failed := err
	unpromoted := errors.Is(failed, clusters.ErrNoPromotion)
	for try := 0; try < 2; try++ {
		if unpromoted && f.late(client) {
			unpromoted, back = false, "; a replica was promoted late"+f.back
		} else if try > 0 {
			break
		}
		rctx, cancel := context.WithTimeout(context.Background(), failoverLimit)
		err = f.fo.Rejoin(rctx)
		cancel()
		if err != nil {
			if !unpromoted && errors.Is(failed, clusters.ErrNoPromotion) {
				line += "; a replica was promoted late"
			}
			end(line + "; rejoin failed: " + err.Error())
			f.fail(fmt.Errorf("rejoin: %w", err))
			return
		}
	}
	end(line + back)
	f.mu.Lock()
	f.busy = false
	f.next = time.Now().Add(cool)
	f.mu.Unlock()
}

// late records the promotion of a failover whose FailPrimary gave up
// waiting for one (clusters.ErrNoPromotion) when the topology has promoted
// a replica since (clusters.LatePromoter): a promotion note marked
// history.PromotedLate, timed when it was seen (the promotion came
// earlier), so that the report shows the promotion there was, and the
// checker, not knowing when it came, never counts it as striking.
func (f *failoverRun) late(client int) bool {
	if f.lp == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	line, ok := f.lp.LatePromotion(ctx)
	cancel()
	if ok {
		f.env.Recorder.Record(history.Event{Type: history.Note, Client: client, Detail: history.FailoverNote + history.PromotedLate + line}, nil)
	}
	return ok
}

// fail keeps the first error; busy stays set: no more failovers on a
// broken topology.
func (f *failoverRun) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.firstErr == nil {
		f.firstErr = err
	}
}
