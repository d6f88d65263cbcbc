package checker

import (
	"fmt"
	"os"
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
