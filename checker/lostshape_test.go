package checker

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

// The shape of issue 17: one lease lock (50 ms), 50 clients, lost answers
// that stay open for the whole op timeout (1 s, 20 leases), half of them
// applied by the server, so that 10-50 indeterminate operations are open at
// every instant; optionally double grants injected by the server.
func lostShape(seed uint64, ops, clients int, lost float64, doubles int) histgen.Config {
	return histgen.Config{
		Seed: seed, Clients: clients, Ops: ops, Indeterminate: lost,
		Lease: true, TTL: 50 * time.Millisecond, OpTimeout: time.Second,
		DoubleHolders: doubles,
	}
}

func lostShapeHistory(t testing.TB, cfg histgen.Config) (*history.History, histgen.Injected) {
	t.Helper()
	out := cfg
	g := histgen.Generate(out)
	h, err := g.History()
	require.NoError(t, err)
	return h, g.Injected
}

// TestLostShapeProbe prints how the linearizable property fares on the
// shape (LOCKTEST_PROBE=1; a measurement, not a test): 10k and 100k
// operations (LOCKTEST_PROBE_OPS), 50 clients, 1% and 5% lost, valid and
// with 3 injected double grants, one seed (LOCKTEST_PROBE_SEED).
//
//	LOCKTEST_PROBE=1 go test ./checker -run TestLostShapeProbe -v -timeout 30m
func TestLostShapeProbe(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	seed := uint64(envInts(t, "LOCKTEST_PROBE_SEED", []int{1})[0])
	for _, ops := range envInts(t, "LOCKTEST_PROBE_OPS", []int{10_000, 100_000}) {
		for _, lost := range []float64{0.01, 0.05} {
			for _, doubles := range []int{0, 3} {
				h, inj := lostShapeHistory(t, lostShape(seed, ops, 50, lost, doubles))
				start := time.Now()
				p, _ := checkLinearizable(newFacts(h), DefaultOptions())
				fmt.Printf("seed=%d ops=%d lost=%.2f doubles=%d injected=%d: %s %s in %v: %s\n", seed, ops, lost, doubles,
					len(inj.DoubleHolders), p.Status, p.Engine, time.Since(start).Round(time.Millisecond), p.Detail)
			}
		}
	}
}

func TestLostShapeFrontier(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	h, _ := lostShapeHistory(t, lostShape(1, 3000, 50, 0.05, 0))
	f := newFacts(h)
	hh := withSessionEnds(f.h, f.holds)
	ops, _, m := prepareLock(hh, int64(5*time.Millisecond))
	s := newSweep(m, 4096)
	s.mergeOrphans, s.look = true, newLookahead(ops, m.ow)
	s.ops = ops
	deadline := time.Now().Add(5 * time.Second)
	s.halt = func() bool { return time.Now().After(deadline) }
	maxF := 0
	for i := range ops {
		s.advance(ops[i].call)
		if s.stopped() {
			break
		}
		s.call(int32(i))
		if ops[i].ret != history.Never {
			s.rets.push(int32(i))
		}
		if n := len(s.frontier); n > maxF && n >= 16 {
			maxF = n
			fmt.Printf("t=%.3fs frontier=%d pools=%d\n", float64(s.t)/1e9, n, len(s.pools))
			if n >= 64 {
				for k := range s.frontier[:min(n, 12)] {
					c := &s.frontier[k]
					fmt.Printf("  client=%d owner=%d acq=[%.3f,%.3f] now=%.4f upto=%.4f lin=%v used=%v grant=%d\n", c.s.client, c.s.owner,
						float64(c.s.acqCall)/1e9, float64(c.s.acqRet)/1e9, float64(c.s.now)/1e9, float64(c.failedUpTo)/1e9, c.lin, c.used, c.grant)
				}
				return
			}
		}
	}
	fmt.Println("stats", s.stats)
}

// withLateDouble returns evs with a double grant injected late (after
// frac of the run): the first acquire refused "held" from then on, whose
// invocation and return both fall inside another client's sure hold
// (acquire returned ok, release not invoked yet, within half a lease of its
// invocation), is granted instead, with an owner of its own. The hold it
// overlaps is definite, so the double grant is proven whatever the lost
// answers did. histgen injects its double grants at the first chance, at
// the start of the run; the are late. ok is false when there is
// no such acquire.
func withLateDouble(evs []history.Event, frac float64, ttl time.Duration) (out []history.Event, opID int64, ok bool) {
	out = slices.Clone(evs)
	type hold struct{ call, ret int64 }
	holds := map[int]hold{}
	calls := map[int64]int64{}
	from := out[int(float64(len(out))*frac)].Time
	for i := range out {
		e := &out[i]
		switch {
		case e.Type == history.Invoke:
			calls[e.OpID] = e.Time
			if e.Op == history.Release {
				delete(holds, e.Client)
			}
		case e.Op == history.Acquire && e.Type == history.OK:
			holds[e.Client] = hold{calls[e.OpID], e.Time}
		case e.Op == history.Acquire && e.Type == history.Fail && e.Reason == history.ReasonHeld && e.Time >= from:
			for c, hd := range holds {
				if c != e.Client && hd.ret < calls[e.OpID] && e.Time < hd.call+int64(ttl)/2 {
					e.Type, e.Reason, e.Owner = history.OK, "", fmt.Sprintf("late-double-%d", e.OpID)
					return out, e.OpID, true
				}
			}
		}
	}
	return out, 0, false
}

// TestLostShapeLateDouble prints how the linearizable property fares on
// the shape with one double grant late in the run (LOCKTEST_PROBE=1; a
// measurement): it must fail, by the sweep or by the proof.
//
//	LOCKTEST_PROBE=1 go test ./checker -run TestLostShapeLateDouble -v -timeout 30m
func TestLostShapeLateDouble(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	for _, ops := range envInts(t, "LOCKTEST_PROBE_OPS", []int{10_000, 100_000}) {
		for _, lost := range []float64{0.01, 0.05} {
			cfg := lostShape(1, ops, 50, lost, 0)
			evs, id, ok := withLateDouble(histgen.Generate(cfg).Events, 0.8, cfg.TTL)
			require.True(t, ok)
			h, err := history.FromEvents(evs)
			require.NoError(t, err)
			start := time.Now()
			p, _ := checkLinearizable(newFacts(h), DefaultOptions())
			fmt.Printf("ops=%d lost=%.2f late double (op %d): %s %s in %v: %s\n", ops, lost, id,
				p.Status, p.Engine, time.Since(start).Round(time.Millisecond), p.Detail)
			require.Equal(t, Fail, p.Status)
		}
	}
}

// TestLostShapeHistgenSeeds holds the linearizable property on histgen's
// OpTimeout shape over 20 seeds (LOCKTEST_PROBE=1; LOCKTEST_PROBE_OPS,
// default 10k and 100k operations), 50 clients, 1% and 5% lost, valid
// (histgen's clients and server keep the lock's promises): every history
// passes, decided by the lock sweep, never out of its bound or budget.
//
//	LOCKTEST_PROBE=1 go test ./checker -run TestLostShapeHistgenSeeds -v -timeout 30m
//
// LOCKTEST_PROBE_SEEDS=1 prints each seed, LOCKTEST_PROBE_BUDGET sets the
// sweep's time budget (a loaded box can spend the minute's wall time on one
// pass); the CPU time is the process's
// (user and system), which a loaded box does not inflate as it does the
// wall time.
func TestLostShapeHistgenSeeds(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	for _, ops := range envInts(t, "LOCKTEST_PROBE_OPS", []int{10_000, 100_000}) {
		for _, lost := range []float64{0.01, 0.05} {
			if l := os.Getenv("LOCKTEST_PROBE_LOST"); l != "" && l != fmt.Sprint(lost) {
				continue
			}
			var times, cpus []time.Duration
			maxF, widened := 0, 0
			for seed := uint64(1); seed <= 20; seed++ {
				h, _ := lostShapeHistory(t, lostShape(seed, ops, 50, lost, 0))
				opts := DefaultOptions()
				if b := os.Getenv("LOCKTEST_PROBE_BUDGET"); b != "" {
					d, err := time.ParseDuration(b)
					require.NoError(t, err)
					opts.SearchBudget = d
				}
				start, cpu := time.Now(), cpuTime()
				p, _ := checkLinearizable(newFacts(h), opts)
				times, cpus = append(times, time.Since(start)), append(cpus, cpuTime()-cpu)
				what := fmt.Sprintf("seed %d, %d ops, %.0f%% lost", seed, ops, lost*100)
				require.Equal(t, Pass, p.Status, "%s: %s", what, p.Detail)
				require.Equal(t, EngineLock, p.Engine, "%s: %s", what, p.Detail)
				require.False(t, p.Search.Exceeded, "%s: %s", what, p.Detail)
				maxF = max(maxF, p.Search.MaxFrontier)
				if p.Search.MaxFrontier > passBeams[0] {
					widened++
				}
				if os.Getenv("LOCKTEST_PROBE_SEEDS") != "" {
					fmt.Printf("  %s: %v wall, %v CPU, at most %d configurations, %d set aside\n", what,
						times[len(times)-1].Round(time.Millisecond), cpus[len(cpus)-1].Round(time.Millisecond), p.Search.MaxFrontier, p.Search.Beam)
				}
			}
			med := func(ds []time.Duration) time.Duration {
				return slices.Sorted(slices.Values(ds))[len(ds)/2].Round(time.Millisecond)
			}
			fmt.Printf("%d ops, 50 clients, %.0f%% lost: 20 seeds pass, wall median %v slowest %v, CPU median %v slowest %v, at most %d configurations, beam widened on %d\n",
				ops, lost*100, med(times), slices.Max(times).Round(time.Millisecond), med(cpus), slices.Max(cpus).Round(time.Millisecond), maxF, widened)
		}
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
