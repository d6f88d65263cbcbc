package checker

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/internal/lostgen"
)

// TestLostShapeTable prints the table of issue 17's shape in
// checker/README.md: internal/lostgen's histories (one 50 ms lease, lost
// answers open for the 1 s op timeout, half of them applied), the
// linearizable property with its default options, median of 3 checks
// after a garbage collection. A measurement, not a test: it runs with
// LOCKTEST_PROBE=1; LOCKTEST_TABLE_OPS (default "10000,100000") picks the
// sizes and LOCKTEST_TABLE_CLIENTS (default "5,10,50") the clients:
//
//	LOCKTEST_PROBE=1 go test ./checker/ -run TestLostShapeTable -v -timeout 60m
func TestLostShapeTable(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	sizes := envInts(t, "LOCKTEST_TABLE_OPS", []int{10_000, 100_000})
	clientsList := envInts(t, "LOCKTEST_TABLE_CLIENTS", []int{5, 10, 50})
	fmt.Println("| ops | clients | lost | double grants (truth) | linearizable | engine | median ms | max configurations |")
	fmt.Println("|---:|---:|---:|---|---|---|---:|---:|")
	lostCells(sizes, clientsList, []float64{0, 0.01, 0.05}, func(cfg lostgen.Config) {
		cfg.Seed = 1
		ops, clients, lost := cfg.Ops, cfg.Clients, cfg.Lost
		h, tr, err := lostgen.GenerateHistory(cfg)
		require.NoError(t, err)
		var ms []float64
		var p Property
		for range 3 {
			runtime.GC()
			start := time.Now()
			p, _ = checkLinearizable(newFacts(h), DefaultOptions())
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
		sort.Float64s(ms)
		if tr.Linearizable == lostgen.Yes {
			require.NotEqual(t, Fail, p.Status, "false FAIL: %s", p.Detail)
		}
		if tr.Linearizable == lostgen.No {
			require.NotEqual(t, Pass, p.Status, "false pass: %s", p.Detail)
		}
		maxF := 0
		if p.Search != nil {
			maxF = p.Search.MaxFrontier
		}
		fmt.Printf("| %d | %d | %.0f%% | %d (%s) | %s | %s | %.1f | %d |\n", ops, clients, lost*100,
			len(tr.Injections), tr.Linearizable, p.Status, p.Engine, ms[1], maxF)
	})
}

// lostCells calls f with internal/lostgen's configuration of each cell of
// issue 17's table (its seed to be set): every size, number of clients and
// share lost, valid or with 5 certain double grants.
func lostCells(sizes, clients []int, losts []float64, f func(cfg lostgen.Config)) {
	for _, ops := range sizes {
		for _, c := range clients {
			for _, lost := range losts {
				for _, double := range []int{0, 5} {
					cfg := lostgen.Config{Ops: ops, Clients: c, Lost: lost, Double: double}
					if double > 0 {
						cfg.Mix = lostgen.MixCertain
					}
					f(cfg)
				}
			}
		}
	}
}

// TestLostShapeSeeds holds the linearizable property to internal/lostgen's
// truth over 20 seeds of issue 17's shape: 10k and 100k operations, 5 and
// 50 clients, 1% and 5% lost, valid or with 5 certain double grants. Never
// unknown, never a wrong verdict, and every verdict the lock sweep's (not
// the proof's, not porcupine's). A measurement of minutes: it runs with
// LOCKTEST_PROBE=1, and prints the slowest check of each cell
// (LOCKTEST_PROBE_OPS: the lengths; LOCKTEST_PROBE_BUDGET: the sweep's time
// budget, for a loaded box).
//
//	LOCKTEST_PROBE=1 go test ./checker/ -run TestLostShapeSeeds -v -timeout 30m
func TestLostShapeSeeds(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	opts := DefaultOptions()
	if b := os.Getenv("LOCKTEST_PROBE_BUDGET"); b != "" {
		d, err := time.ParseDuration(b)
		require.NoError(t, err)
		opts.SearchBudget = d
	}
	lostCells(envInts(t, "LOCKTEST_PROBE_OPS", []int{10_000, 100_000}), []int{5, 50}, []float64{0.01, 0.05}, func(cell lostgen.Config) {
		var slowest time.Duration
		maxF := 0
		for seed := int64(1); seed <= 20; seed++ {
			cfg := cell
			cfg.Seed = seed
			h, tr, err := lostgen.GenerateHistory(cfg)
			require.NoError(t, err)
			start := time.Now()
			p, _ := checkLinearizable(newFacts(h), opts)
			slowest = max(slowest, time.Since(start))
			want := map[string]Status{lostgen.Yes: Pass, lostgen.No: Fail}[tr.Linearizable]
			require.Equal(t, want, p.Status, "%+v: truth %s (%s): %s", cfg, tr.Linearizable, tr.Why, p.Detail)
			require.Equal(t, EngineLock, p.Engine, "%+v: %s", cfg, p.Detail)
			require.False(t, p.Search.Exceeded, "%+v: %s", cfg, p.Detail)
			maxF = max(maxF, p.Search.MaxFrontier)
		}
		fmt.Printf("%d ops, %d clients, %.0f%% lost, %d double grants: 20 seeds right, slowest %v, at most %d configurations\n",
			cell.Ops, cell.Clients, cell.Lost*100, cell.Double, slowest.Round(time.Millisecond), maxF)
	})
}

// envInts reads a comma-separated list of integers from the environment.
func envInts(t *testing.T, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err, "%s", name)
		out = append(out, n)
	}
	return out
}
