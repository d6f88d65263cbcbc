package checker

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
	"github.com/locktest/locktest/internal/lostgen"
)

// beamPass is a first pass over ops with a beam of beam (as firstPass
// builds it), checkpoints every ckEvery returns.
func beamPass(m lockModel, ops []lockOp, beam, ckEvery int) *sweep {
	opts := DefaultOptions()
	s := newSweep(m, opts.SearchBound)
	s.mergeOrphans, s.look = true, newLookahead(ops, m.ow)
	s.capacity, s.horizon = passCapacity, int64(opts.LostHorizon)
	s.beam, s.baseBeam, s.ckEvery, s.ckKeep = beam, beam, ckEvery, resumeKeep
	return s
}

// passState is what a pass ends with, for comparing two passes.
type passState struct {
	Through, Failed bool
	Blocker         int32
	Stats           SearchStats
	Rules           ruleCounts
	Frontier        []config
	Pools           []pool
	Running, HeldIn []int32
	T               int64
}

func stateOf(s *sweep, through bool) passState {
	st := passState{Through: through, Failed: s.failed, Blocker: s.blocker, Stats: s.stats, Rules: s.rules,
		Frontier: s.frontier, Pools: s.pools, Running: s.inflight, HeldIn: s.heldIn, T: s.t}
	if len(st.Running) == 0 {
		st.Running = nil
	}
	if len(st.HeldIn) == 0 {
		st.HeldIn = nil
	}
	if s.failed {
		st.Frontier = s.before
	}
	for k := range st.Pools {
		st.Pools[k].ops = st.Pools[k].ops[:len(st.Pools[k].ops):len(st.Pools[k].ops)]
	}
	return st
}

// TestResumeReproducesPass holds a checkpoint to being the whole state of
// the pass (sweep_resume.go): a pass resumed from any checkpoint with the
// beam it had ends exactly as the pass that took it (verdict, blocker,
// statistics, configurations, pools, running operations; of up to 8
// checkpoints spread over the pass), and so does a
// second resume from the same checkpoint (a resumed pass leaves its
// checkpoint as it was). Checkpoints are taken every 1, 5 and 40 returns,
// on histgen's OpTimeout shape and on lostgen's, valid and not.
func TestResumeReproducesPass(t *testing.T) {
	n := 24
	if testing.Short() || raceEnabled {
		n = 6
	}
	rng := rand.New(rand.NewPCG(17, 5))
	resumed := 0
	for i := range n {
		var h *history.History
		switch i % 3 {
		case 2:
			ttl := time.Duration(2+rng.IntN(4)) * time.Millisecond
			cfg := histgen.Config{
				Seed: uint64(i), Clients: 4 + rng.IntN(8), Ops: 2000,
				Indeterminate: []float64{0.05, 0.1, 0.2}[rng.IntN(3)],
				Lease:         true, TTL: ttl, OpTimeout: time.Duration(5+rng.IntN(16)) * ttl,
				DoubleHolders: i % 2,
			}
			h, _ = lostShapeHistory(t, cfg)
		case 0:
			cfg := lostShape(uint64(i), 1500+rng.IntN(1500), 10+rng.IntN(40), []float64{0.01, 0.05}[rng.IntN(2)], i%3)
			h, _ = lostShapeHistory(t, cfg)
		default:
			lcfg := smallLostShape(int64(i), rng)
			lcfg.Ops, lcfg.Clients = 2000, 10+rng.IntN(20)
			var err error
			h, _, err = lostgen.GenerateHistory(lcfg)
			require.NoError(t, err)
		}
		ops, _, m := prepareLock(h, int64(DefaultOptions().Slack))
		for _, every := range []int{1, 5, 40} {
			beam := 1 + rng.IntN(4)
			s := beamPass(m, ops, beam, every)
			s.ckKeep = 1 << 30 // (all of them)
			through := s.runFrom(ops)
			if s.stats.Exceeded {
				continue
			}
			want := stateOf(s, through)
			step := max(1, len(s.cks)/8)
			for k := 0; k < len(s.cks); k += step {
				cp := s.cks[k]
				for range 2 {
					r := cp.resumeFrom(nil, beam)
					got := stateOf(r, r.runFrom(ops))
					require.Equal(t, want, got, "history %d, checkpoints every %d, beam %d: resumed at return %d", i, every, beam, cp.at)
					resumed++
				}
			}
		}
	}
	require.Greater(t, resumed, 20, "too few checkpoints resumed")
}

// TestResumedPassIsALinearization is TestBeamPassIsALinearization for
// resumed passes (sweep_resume.go), on histories small enough for
// porcupine (3-8 clients, histgen's OpTimeout shape and lostgen's): a pass
// with a beam of 1 or 2 and checkpoints every 3 returns, resumed wider
// where it stops, that resumed and got through is a linearization (porcupine
// passes the history); one that resumed and still stopped proves nothing:
// the test requires histories where that happened although porcupine
// passes them, and runLockSweep (which then goes on to wider passes and the
// exact one) must agree with porcupine on every history, so it fails if
// such a stop is taken for a failure.
func TestResumedPassIsALinearization(t *testing.T) {
	// Not in parallel: it sets resumeEvery, which every sweep reads.
	n := 300
	if testing.Short() || raceEnabled {
		n = 80
	}
	opts := DefaultOptions()
	// runLockSweep too takes checkpoints every 3 returns (these histories
	// have no more than a few hundred).
	defer func(every int) { resumeEvery = every }(resumeEvery)
	resumeEvery = 3
	var resumedPassed, resumedStoppedLegal, decided int
	check := func(what string, h *history.History) {
		kept, dropped, m := prepareLock(h, int64(opts.Slack))
		ow := newOwners(0)
		all := lockOps(h, ow)
		want := porcupineVerdict(newLockModel(h.Info, int64(opts.Slack), ow), all, time.Second)
		if want == porcupine.Unknown {
			return
		}
		decided++
		for _, beam := range []int{1, 2} {
			s := beamPass(m, kept, beam, 3).resuming(kept)
			if s.stats.Exceeded || s.resumed == 0 {
				continue
			}
			if !s.stopped() {
				require.Equal(t, porcupine.Ok, want, "%s: a pass with a beam of %d resumed %d times found no linearization", what, beam, s.resumed)
				resumedPassed++
			} else if want == porcupine.Ok {
				resumedStoppedLegal++
			}
		}
		got := sweepOutcome(runLockSweep(kept, dropped, m, opts).s)
		if got != -1 {
			require.Equal(t, map[porcupine.CheckResult]int{porcupine.Ok: 1, porcupine.Illegal: 0}[want], got, "%s: runLockSweep", what)
		}
	}
	smallShapes(t, 4, n, 300, check)
	t.Logf("%d histories decided by porcupine; a resumed pass got through %d times, stopped on a linearizable history %d times",
		decided, resumedPassed, resumedStoppedLegal)
	require.Positive(t, resumedPassed, "no resumed pass got through: resuming is not tested")
	require.Positive(t, resumedStoppedLegal, "no resumed pass stopped on a linearizable history: the stop's status is not tested")
}
