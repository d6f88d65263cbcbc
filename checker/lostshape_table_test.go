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
	for _, ops := range sizes {
		for _, clients := range clientsList {
			for _, lost := range []float64{0, 0.01, 0.05} {
				for _, double := range []int{0, 5} {
					cfg := lostgen.Config{Ops: ops, Clients: clients, Lost: lost, Double: double, Seed: 1}
					if double > 0 {
						cfg.Mix = lostgen.MixCertain
					}
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
				}
			}
		}
	}
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
