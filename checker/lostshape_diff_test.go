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

// TestLostShapeAgreesWithPorcupine: issue 17's shape, small enough for
// porcupine to decide (a few hundred operations): lost answers open for
// many leases, half of them applied. internal/lostgen's clients send
// nothing after a lost acquire, so its holders become anonymous and their
// acquires spent (counted, not named); histgen's OpTimeout clients send a
// clean-up release naming the lost acquire's owner, refused "not-owner"
// (half of those histories mutated three times: an outcome flipped, an
// answer lost, a completion moved, an owner changed).
// On every history porcupine decides, the sweep (exact pass alone, and as
// Check runs it) gives its verdict, and lostgen's ground truth agrees where
// it is known. The rules made for the shape must have decided something
// (ruleCounts), or the test would not test them.
func TestLostShapeAgreesWithPorcupine(t *testing.T) {
	t.Parallel()
	n := 300
	if testing.Short() || raceEnabled {
		n = 80
	}
	var rules ruleCounts
	count := func(h *history.History) {
		kept, dropped, m := prepareLock(h, int64(DefaultOptions().Slack))
		r := runLockSweep(kept, dropped, m, DefaultOptions()).s.rules
		rules.spent += r.spent
		rules.expiredOverFree += r.expiredOverFree
		rules.refusedAtOnce += r.refusedAtOnce
	}
	t.Run("lostgen", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(17, 1))
		decided, illegal := 0, 0
		for i := range n {
			cfg := smallLostShape(int64(i), rng)
			if rng.IntN(2) == 0 {
				cfg.Double = 1 + rng.IntN(cfg.Ops/40+1)
				cfg.Mix = []lostgen.Mix{lostgen.MixCertain, lostgen.MixMixed, lostgen.MixExplainable}[rng.IntN(3)]
			}
			h, tr, err := lostgen.GenerateHistory(cfg)
			require.NoError(t, err)
			v := judge(h, time.Second)
			what := fmt.Sprintf("lostgen %+v", cfg)
			if requireAgree(t, what, h, v) {
				decided++
				if v.porcupine == porcupine.Illegal {
					illegal++
				}
				want := map[string]porcupine.CheckResult{lostgen.Yes: porcupine.Ok, lostgen.No: porcupine.Illegal}
				if w, ok := want[tr.Linearizable]; ok {
					require.Equal(t, w, v.porcupine, "%s: truth %s (%s)", what, tr.Linearizable, tr.Why)
				}
			}
			count(h)
		}
		t.Logf("%d lostgen histories, %d decided by porcupine, %d of them illegal", n, decided, illegal)
		require.Greater(t, decided, n/2)
		require.Greater(t, illegal, 0)
	})
	t.Run("histgen clean-up releases", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(17, 2))
		decided, illegal := 0, 0
		for i := range n {
			ttl := time.Duration(2+rng.IntN(4)) * time.Millisecond
			cfg := histgen.Config{
				Seed: uint64(i), Clients: 2 + rng.IntN(5), Ops: 40 + rng.IntN(160),
				Indeterminate: []float64{0.03, 0.05, 0.1, 0.2}[rng.IntN(4)],
				Lease:         true, TTL: ttl, OpTimeout: time.Duration(5+rng.IntN(16)) * ttl,
			}
			if rng.IntN(2) == 0 {
				cfg.DoubleHolders = 1 + rng.IntN(2)
			}
			evs := histgen.Generate(cfg).Events
			for range i % 2 * 3 {
				evs = mutate(evs, rng)
			}
			h, err := history.FromEvents(evs)
			require.NoError(t, err)
			v := judge(h, time.Second)
			d, il := agreeCount(t, fmt.Sprintf("histgen %+v", cfg), h, v)
			decided, illegal = decided+d, illegal+il
			count(h)
		}
		t.Logf("%d histgen histories, %d decided by porcupine, %d of them illegal", n, decided, illegal)
		require.Greater(t, decided, n/2)
		require.Greater(t, illegal, 0)
	})
	t.Logf("rules: %+v", rules)
	require.Positive(t, rules.spent, "no dominance counted spent lost acquires")
	require.Positive(t, rules.expiredOverFree, "no expired holder dominated a free lock")
	require.Positive(t, rules.refusedAtOnce, "no refused release was placed at once")
}

// smallLostShape is internal/lostgen's configuration of issue 17's shape
// small enough for porcupine: 60-300 operations, 2-6 clients, 5-20% lost,
// op timeouts of 5-20 leases.
func smallLostShape(seed int64, rng *rand.Rand) lostgen.Config {
	return lostgen.Config{
		Seed: seed, Ops: 60 + rng.IntN(240), Clients: 2 + rng.IntN(5),
		Lost:  []float64{0.05, 0.1, 0.2}[rng.IntN(3)],
		Lease: 24 * time.Millisecond, OpTimeout: time.Duration(5+rng.IntN(16)) * 24 * time.Millisecond,
		RoundTrip: 300 * time.Microsecond, Hold: 2 * time.Millisecond, Think: 2 * time.Millisecond,
	}
}
