package checker

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/internal/histgen"
)

// TestDifferential runs the interval checks and the linearizability check
// over thousands of small random histories, valid and with injected
// violations: the interval double-holder check must never flag a history
// the linearizability check accepts, and the interval checks must find
// every injected violation.
func TestDifferential(t *testing.T) {
	n := 5000
	switch {
	case testing.Short():
		n = 300
	case raceEnabled:
		n = 1000
	}
	rng := rand.New(rand.NewPCG(42, 7))
	opts := DefaultOptions()
	var flagged, illegal, valid int
	for i := range n {
		cfg := histgen.Config{
			Seed:          uint64(i),
			Clients:       2 + rng.IntN(3),
			Ops:           20 + rng.IntN(60),
			Indeterminate: []float64{0, 0.03, 0.1}[rng.IntN(3)],
			Resource:      rng.IntN(2) == 0,
			Reentrant:     rng.IntN(4) == 0,
		}
		if rng.IntN(2) == 0 {
			cfg.DoubleHolders = rng.IntN(3)
			cfg.ForeignReleases = rng.IntN(2)
			cfg.LostUpdates = rng.IntN(2)
		}
		out := histgen.Generate(cfg)
		h, err := out.History()
		require.NoError(t, err)

		f := newFacts(h)
		_, doubles := checkDoubleHolder(f, int64(opts.Slack))
		_, foreign := checkForeignRelease(f)
		_, lost, _ := checkLostUpdate(f)
		lin, _ := checkLinearizable(f, opts)
		require.NotEqual(t, Unknown, lin.Status, "seed %d: %s", i, lin.Detail)
		if lin.Status == Fail {
			illegal++
		}
		if len(doubles) > 0 {
			flagged++
			require.Equal(t, Fail, lin.Status, "seed %d (%+v): double holder %q in a history porcupine accepts", i, cfg, doubles[0].Explanation)
		}
		if out.Injected.Total() == 0 {
			valid++
			require.Empty(t, doubles, "seed %d: valid history flagged", i)
			require.Empty(t, foreign, "seed %d: valid history flagged", i)
			require.Empty(t, lost, "seed %d: valid history flagged", i)
			require.Equal(t, Pass, lin.Status, "seed %d: valid history not linearizable", i)
		}
		requireFound(t, i, "double holder", out.Injected.DoubleHolders, doubles)
		requireFound(t, i, "foreign release", out.Injected.ForeignReleases, foreign)
		requireFound(t, i, "lost update", out.Injected.LostUpdates, lost)
	}
	t.Logf("%d histories: %d valid, %d with an interval double holder, %d illegal for porcupine", n, valid, flagged, illegal)
	require.Greater(t, flagged, n/10, "too few double holders to compare")
	require.Greater(t, valid, n/4, "too few valid histories")
}

func requireFound(t *testing.T, seed int, what string, injected []int64, found []Anomaly) {
	t.Helper()
	for _, id := range injected {
		require.True(t, slices.ContainsFunc(found, func(a Anomaly) bool { return slices.Contains(a.Ops, id) }),
			"seed %d: injected %s (op %d) not found", seed, what, id)
	}
}

// TestGeneratedLeaseHistories checks that valid lease histories from the
// generator, with lost answers, pass every check.
func TestGeneratedLeaseHistories(t *testing.T) {
	for seed := range uint64(40) {
		cfg := histgen.Config{Seed: seed, Clients: 4, Ops: 400, Lease: true, TTL: 20e6, Resource: true, Indeterminate: 0.1, Reentrant: seed%2 == 1}
		h, err := histgen.Generate(cfg).History()
		require.NoError(t, err)
		r := Check(h, DefaultOptions())
		require.Equal(t, Safe, r.Verdict, "seed %d: %s %+v", seed, r.Why, r.Anomalies)
		require.Equal(t, r.Counts.WritesAccepted, int(r.Counts.ResourceFinal))
	}
}
