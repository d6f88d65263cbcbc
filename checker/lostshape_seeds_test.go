package checker

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/internal/lostgen"
)

// TestLostShapeSeeds holds the linearizable property to internal/lostgen's
// truth over 20 seeds of issue 17's shape: 10k and 100k operations, 5 and
// 50 clients, 1% and 5% lost, valid or with 5 certain double grants. Never
// unknown, never a wrong verdict, and every verdict the lock sweep's (not
// the proof's, not porcupine's). A measurement of minutes: it runs with
// LOCKTEST_PROBE=1, and prints the slowest check of each cell.
//
//	LOCKTEST_PROBE=1 go test ./checker/ -run TestLostShapeSeeds -v -timeout 30m
func TestLostShapeSeeds(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	for _, ops := range []int{10_000, 100_000} {
		for _, clients := range []int{5, 50} {
			for _, lost := range []float64{0.01, 0.05} {
				for _, double := range []int{0, 5} {
					var slowest time.Duration
					maxF := 0
					for seed := int64(1); seed <= 20; seed++ {
						cfg := lostgen.Config{Ops: ops, Clients: clients, Lost: lost, Double: double, Seed: seed}
						if double > 0 {
							cfg.Mix = lostgen.MixCertain
						}
						h, tr, err := lostgen.GenerateHistory(cfg)
						require.NoError(t, err)
						start := time.Now()
						p, _ := checkLinearizable(newFacts(h), DefaultOptions())
						slowest = max(slowest, time.Since(start))
						want := map[string]Status{lostgen.Yes: Pass, lostgen.No: Fail}[tr.Linearizable]
						require.Equal(t, want, p.Status, "%+v: truth %s (%s): %s", cfg, tr.Linearizable, tr.Why, p.Detail)
						require.Equal(t, EngineLock, p.Engine, "%+v: %s", cfg, p.Detail)
						require.False(t, p.Search.Exceeded, "%+v: %s", cfg, p.Detail)
						maxF = max(maxF, p.Search.MaxFrontier)
					}
					fmt.Printf("%d ops, %d clients, %.0f%% lost, %d double grants: 20 seeds right, slowest %v, at most %d configurations\n",
						ops, clients, lost*100, double, slowest.Round(time.Millisecond), maxF)
				}
			}
		}
	}
}
