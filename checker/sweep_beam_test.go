package checker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
	"github.com/locktest/locktest/internal/lostgen"
)

// TestBeamPassIsALinearization holds the first pass's beam (sweep_beam.go)
// to its contract on issue 17's shape, small enough for porcupine: a pass
// that cut and still reached the end found a linearization (porcupine
// passes the history), and a pass that cut and stopped proves nothing: the
// test requires histories where a narrow beam stopped although porcupine
// passes them (so treating such a stop as a failure would be caught), and
// where it cut and passed (so the pass is tested). runLockSweep, which
// widens the beam and then runs the exact pass, must agree with porcupine
// on every one of them.
func TestBeamPassIsALinearization(t *testing.T) {
	n := 240
	if testing.Short() || raceEnabled {
		n = 60
	}
	opts := DefaultOptions()
	var cutPassed, cutStoppedLegal, decided int
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
			s := newSweep(m, opts.SearchBound)
			s.mergeOrphans, s.look = true, newLookahead(kept, m.ow)
			s.beam = beam
			passed := s.runAll(kept)
			if s.stats.Exceeded || s.stats.Beam == 0 {
				continue
			}
			if passed {
				require.Equal(t, porcupine.Ok, want, "%s: a pass with a beam of %d found no linearization", what, beam)
				cutPassed++
			} else if want == porcupine.Ok {
				cutStoppedLegal++
			}
		}
		got := sweepOutcome(runLockSweep(kept, dropped, m, opts).s)
		if got != -1 {
			require.Equal(t, map[porcupine.CheckResult]int{porcupine.Ok: 1, porcupine.Illegal: 0}[want], got, "%s: runLockSweep", what)
		}
	}
	smallShapes(t, 3, n, 200, check)
	t.Logf("%d histories decided by porcupine; beam cut and passed %d times, cut and stopped on a linearizable history %d times",
		decided, cutPassed, cutStoppedLegal)
	require.Positive(t, cutPassed, "no beam cut and passed: the pass is not tested")
	require.Positive(t, cutStoppedLegal, "no narrow beam stopped on a linearizable history: the stop's status is not tested")
}

// smallShapes hands check n histories of issue 17's shapes small enough
// for porcupine (3-8 clients): histgen's OpTimeout shape (60 to 60+ops-1
// operations, a third with a double holder, every other one mutated) and
// lostgen's, drawn from seed.
func smallShapes(t *testing.T, seed uint64, n, ops int, check func(what string, h *history.History)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(17, seed))
	for i := range n {
		ttl := time.Duration(2+rng.IntN(4)) * time.Millisecond
		cfg := histgen.Config{
			Seed: uint64(i), Clients: 3 + rng.IntN(6), Ops: 60 + rng.IntN(ops),
			Indeterminate: []float64{0.05, 0.1, 0.2}[rng.IntN(3)],
			Lease:         true, TTL: ttl, OpTimeout: time.Duration(5+rng.IntN(16)) * ttl,
		}
		if rng.IntN(3) == 0 {
			cfg.DoubleHolders = 1
		}
		evs := histgen.Generate(cfg).Events
		for range i % 2 * 2 {
			evs = mutate(evs, rng)
		}
		h, err := history.FromEvents(evs)
		require.NoError(t, err)
		check(fmt.Sprintf("histgen %+v", cfg), h)

		lcfg := smallLostShape(int64(i), rng)
		lh, _, err := lostgen.GenerateHistory(lcfg)
		require.NoError(t, err)
		check(fmt.Sprintf("lostgen %+v", lcfg), lh)
	}
}

// TestBeamMovesCountAsCut: where a beam pass leaves lost acquires untried
// (anyLostAcquire), it counts them as cut, so that a stop it owes to them
// is never taken for a failure. With no lost acquire tried at all
// (beamMoves 0) and a beam too wide to cut anything else, the passes that
// stop on histories porcupine passes must say they cut; those that get
// through must be linearizations. It fails when the untried pools are not
// counted.
func TestBeamMovesCountAsCut(t *testing.T) {
	n := 120
	if testing.Short() || raceEnabled {
		n = 40
	}
	defer func(k int) { beamMoves = k }(beamMoves)
	beamMoves = 0
	opts := DefaultOptions()
	var stoppedLegal int
	smallShapes(t, 5, n, 200, func(what string, h *history.History) {
		kept, _, m := prepareLock(h, int64(opts.Slack))
		ow := newOwners(0)
		want := porcupineVerdict(newLockModel(h.Info, int64(opts.Slack), ow), lockOps(h, ow), time.Second)
		if want == porcupine.Unknown {
			return
		}
		s := newSweep(m, opts.SearchBound)
		s.mergeOrphans, s.look = true, newLookahead(kept, m.ow)
		s.beam = 1 << 20
		passed := s.runAll(kept)
		switch {
		case s.stats.Exceeded:
		case passed:
			require.Equal(t, porcupine.Ok, want, "%s: a pass that tried no lost acquire found no linearization", what)
		case want == porcupine.Ok:
			require.Positive(t, s.stats.Beam, "%s: a pass that left lost acquires untried stopped on a linearizable history without saying it cut", what)
			stoppedLegal++
		}
	})
	t.Logf("%d passes stopped on linearizable histories for want of a lost acquire", stoppedLegal)
	require.Positive(t, stoppedLegal, "no pass stopped for want of a lost acquire: the count is not tested")
}
