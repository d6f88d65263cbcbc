package checker

import (
	"fmt"
	"testing"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

func generated(b *testing.B, cfg histgen.Config) *history.History {
	b.Helper()
	h, err := histgen.Generate(cfg).History()
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func reportOps(b *testing.B, ops int) {
	b.ReportMetric(float64(ops)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkCheckNoSearch runs every check but the linearizability search
// (the history is far above PorcupineMaxOps) on 1M-operation histories.
func BenchmarkCheckNoSearch(b *testing.B) {
	for _, clients := range []int{5, 50} {
		b.Run(fmt.Sprintf("ops=1M/clients=%d", clients), func(b *testing.B) {
			h := generated(b, histgen.Config{
				Seed: 1, Clients: clients, Ops: 1_000_000, Resource: true, Indeterminate: 0.01,
				DoubleHolders: 3, ForeignReleases: 1, LostUpdates: 3,
			})
			opts := DefaultOptions()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r := Check(h, opts)
				if r.Verdict != Unsafe {
					b.Fatalf("verdict %s: %s", r.Verdict, r.Why)
				}
			}
			reportOps(b, len(h.Ops))
		})
	}
}

// BenchmarkPorcupine runs the linearizability search alone on valid
// histories of 5 clients.
func BenchmarkPorcupine(b *testing.B) {
	for _, ops := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("ops=%d/clients=5", ops), func(b *testing.B) {
			h := generated(b, histgen.Config{Seed: 1, Clients: 5, Ops: ops, Indeterminate: 0.01})
			opts := DefaultOptions()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p, _ := checkLinearizable(newFacts(h), opts)
				if p.Status != Pass {
					b.Fatalf("%s: %s", p.Status, p.Detail)
				}
			}
			reportOps(b, len(h.Ops))
		})
	}
}
