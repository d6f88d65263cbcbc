package checker

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/lostgen"
)

// BenchmarkWitness100k: the witness of one anomaly of each kind found in
// 100k-operation histories of internal/lostgen (50 clients, 1% lost
// answers, injected double grants and a resource; and issue 17's client
// deaf to its answers for 2 s, whose unavailability every refusal of which
// a lost acquire explains, which the minimiser must cut out of the whole
// history). Median time per witness (med-ms) and the operations kept.
func BenchmarkWitness100k(b *testing.B) {
	shapes := []struct {
		name string
		cfg  lostgen.Config
	}{
		{"double grants", lostgen.Config{Ops: 100_000, Clients: 50, Lost: 0.01, Double: 5, Mix: lostgen.MixCertain, Resource: true, Seed: 1}},
		{"deaf client", lostgen.Config{Ops: 100_000, Clients: 5, Lost: 0.01, DeafClient: 1, DeafFrom: time.Second, DeafFor: 2 * time.Second, DeadlockMs: 1000, Seed: 16}},
	}
	for _, sh := range shapes {
		h, _, err := lostgen.GenerateHistory(sh.cfg)
		if err != nil {
			b.Fatal(err)
		}
		r := Check(h, DefaultOptions())
		seen := map[Kind]bool{}
		for _, a := range r.Anomalies {
			if seen[a.Kind] {
				continue
			}
			seen[a.Kind] = true
			b.Run(sh.name+"/"+string(a.Kind), func(b *testing.B) { benchWitness(b, h, a) })
		}
	}
}

func benchWitness(b *testing.B, h *history.History, a Anomaly) {
	var w HistoryWitness
	runMedian(b, len(h.Ops), func() {
		var ok bool
		w, ok = MinimizeAnomaly(context.Background(), h, a, DefaultOptions(), time.Now().Add(time.Minute))
		if !ok || !w.Minimal {
			b.Fatalf("no 1-minimal witness of %s (ok %v)", a.Kind, ok)
		}
	})
	b.ReportMetric(float64(w.Ops), "ops-kept")
	b.ReportMetric(float64(w.Tests), "tests")
}
