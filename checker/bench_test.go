package checker

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

// The linearizability benchmark: the lock sweep and porcupine side by side
// on the same generated histories, 1k to 1M operations, 5 to 50 clients,
// valid or with injected violations, with or without lost answers (1% of
// acquires and releases indeterminate), and a lease variant. Both engines
// get the history after the same exact preprocessing (failed acquires
// inside held windows dropped), porcupine's best configuration.
//
//	go test ./checker/ -run XXX -bench Linearizable -benchtime 5x -benchmem
//
// Each cell reports the median of its iterations (med-ms; at least 21
// samples where they take under 2 s together) and the
// operations of the history per second at that median (ops/s); ns/op and
// B/op are Go's means. Porcupine runs only where it finishes: the cells
// where it would need more than 4 GB or 60 s skip, saying why.

type benchVariant struct {
	name              string
	lost              float64
	violations, lease bool
	readWrite         bool        // a read-write lock: 2/3 of the acquires readers
	porcupineMax      map[int]int // clients -> largest ops porcupine finishes (measured)
}

// porcupineMax is, per variant and number of clients, the largest history
// porcupine decided within 60 s and 4 GB (TestPorcupineProbe, one at a time
// on this 2-core box); the next size up exceeded 4 GB.
var benchVariants = []benchVariant{
	{name: "valid", porcupineMax: map[int]int{5: 100_000, 10: 100_000, 50: 1_000_000}},
	{name: "violations", violations: true, porcupineMax: map[int]int{5: 1_000_000, 10: 1_000_000, 50: 1_000_000}},
	{name: "lost", lost: 0.01, porcupineMax: map[int]int{5: 100_000, 10: 100_000, 50: 10_000}},
	{name: "lost+violations", lost: 0.01, violations: true, porcupineMax: map[int]int{5: 1_000_000, 10: 1_000_000, 50: 1_000_000}},
	{name: "lease+lost", lease: true, lost: 0.01, porcupineMax: map[int]int{5: 100_000, 10: 100_000, 50: 10_000}},
	// Read-write rows: porcupine up to 100k operations (1.0-4.4 s, 0.2-2.3
	// GB each, TestPorcupineProbe), not at 1M (its cache alone would need
	// ~n^2/8 bytes); rw+violations with 50 clients only at 1k (10k took 60
	// s, 100k 25 s).
	{name: "rw", readWrite: true, porcupineMax: map[int]int{5: 100_000, 10: 100_000, 50: 100_000}},
	{name: "rw+violations", readWrite: true, violations: true, porcupineMax: map[int]int{5: 100_000, 10: 100_000, 50: 1_000}},
	{name: "rw+lease+lost", readWrite: true, lease: true, lost: 0.01, porcupineMax: map[int]int{5: 100_000, 10: 100_000, 50: 100_000}},
}

// config is the generator's configuration of a cell.
func (v benchVariant) config(ops, clients int) histgen.Config {
	cfg := histgen.Config{Seed: 1, Clients: clients, Ops: ops, Indeterminate: v.lost, Lease: v.lease, ReadWrite: v.readWrite}
	if v.violations {
		cfg.DoubleHolders, cfg.ForeignReleases = 3, 1
		if v.readWrite {
			cfg.DoubleHolders, cfg.ReadersUnderWriter = 2, 2
		}
	}
	return cfg
}

// porcupineLimit says why porcupine skips a cell.
func (v benchVariant) porcupineLimit(ops, clients int) string {
	if ops <= v.porcupineMax[clients] {
		return ""
	}
	if v.readWrite {
		return fmt.Sprintf("porcupine: not run above %s operations, %d clients, %s", short(v.porcupineMax[clients]), clients, v.name)
	}
	return fmt.Sprintf("porcupine: over 4 GB (killed) at %s operations, %d clients, %s (measured with TestPorcupineProbe)", short(ops), clients, v.name)
}

var benchCache struct {
	key string
	h   *history.History
}

// benchHistory generates (once per key in a row) the history of a cell.
func benchHistory(b *testing.B, ops, clients int, v benchVariant) *history.History {
	b.Helper()
	key := fmt.Sprint(ops, clients, v.name)
	if benchCache.key == key {
		return benchCache.h
	}
	benchCache.h = nil // let the previous one go first
	h, err := histgen.Generate(v.config(ops, clients)).History()
	if err != nil {
		b.Fatal(err)
	}
	benchCache.key, benchCache.h = key, h
	// The generator's garbage (several times the history) is collected
	// now, before the timer starts, not by whichever check runs into it.
	runtime.GC()
	return h
}

// runMedian runs f b.N times and reports the median time and throughput.
func runMedian(b *testing.B, ops int, f func()) {
	var ts []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		f()
		ts = append(ts, time.Since(t0))
	}
	// Fast cells: at least 21 samples for the median (within 2 s).
	b.StopTimer()
	for spent := time.Duration(0); len(ts) < 21 && spent < 2*time.Second; {
		t0 := time.Now()
		f()
		d := time.Since(t0)
		ts, spent = append(ts, d), spent+d
	}
	slices.Sort(ts)
	med := ts[len(ts)/2]
	b.ReportMetric(float64(med.Nanoseconds())/1e6, "med-ms")
	b.ReportMetric(float64(ops)/med.Seconds(), "ops/s")
}

func BenchmarkLinearizable(b *testing.B) {
	sizes := []int{1_000, 10_000, 100_000, 1_000_000}
	for _, v := range benchVariants {
		for _, ops := range sizes {
			for _, clients := range []int{5, 10, 50} {
				name := fmt.Sprintf("%s/ops=%s/clients=%d", v.name, short(ops), clients)
				b.Run(name+"/engine=lock", func(b *testing.B) {
					h := benchHistory(b, ops, clients, v)
					opts := DefaultOptions()
					want := expectedStatus(v)
					fallback := false
					runMedian(b, len(h.Ops), func() {
						p, _ := checkLinearizable(newFacts(h), opts)
						// Read-write lease histories with lost answers
						// may exceed the sweep's bound: porcupine then
						// decides (reported as fallback=1).
						if p.Status != want || (p.Engine != EngineLock && !v.readWrite) {
							b.Fatalf("%s by %s: %s", p.Status, p.Engine, p.Detail)
						}
						fallback = p.Engine != EngineLock
					})
					if fallback {
						b.ReportMetric(1, "fallback")
					}
				})
				b.Run(name+"/engine=porcupine", func(b *testing.B) {
					if why := v.porcupineLimit(ops, clients); why != "" {
						b.Skip(why)
					}
					h := benchHistory(b, ops, clients, v)
					opts := DefaultOptions()
					opts.Engine = EnginePorcupine
					opts.PorcupineTimeout = time.Minute
					opts.PorcupineMaxOps = 1 << 30
					want := expectedStatus(v)
					runMedian(b, len(h.Ops), func() {
						p, _ := checkLinearizable(newFacts(h), opts)
						if p.Status != want {
							b.Fatalf("%s: %s", p.Status, p.Detail)
						}
					})
				})
			}
		}
	}
}

func expectedStatus(v benchVariant) Status {
	if v.violations {
		return Fail
	}
	return Pass
}

func short(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}

// BenchmarkCheck runs every check on a 1M-operation history.
func BenchmarkCheck(b *testing.B) {
	for _, clients := range []int{5, 50} {
		b.Run(fmt.Sprintf("ops=1M/clients=%d", clients), func(b *testing.B) {
			h, err := histgen.Generate(histgen.Config{
				Seed: 1, Clients: clients, Ops: 1_000_000, Resource: true, Indeterminate: 0.01,
				DoubleHolders: 3, ForeignReleases: 1, LostUpdates: 3,
			}).History()
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC() // (see benchHistory)
			opts := DefaultOptions()
			runMedian(b, len(h.Ops), func() {
				r := Check(h, opts)
				if r.Verdict != Unsafe {
					b.Fatalf("verdict %s: %s", r.Verdict, r.Why)
				}
			})
		})
	}
}

// TestPorcupineProbe measures one porcupine cell of the benchmark, for the
// skip rules above: LOCKTEST_PROBE=variant,ops,clients (run it under
// /usr/bin/time -v for the memory).
func TestPorcupineProbe(t *testing.T) {
	spec := os.Getenv("LOCKTEST_PROBE")
	if spec == "" {
		t.Skip("set LOCKTEST_PROBE=variant,ops,clients")
	}
	var name string
	var ops, clients int
	if _, err := fmt.Sscanf(strings.ReplaceAll(spec, ",", " "), "%s %d %d", &name, &ops, &clients); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(benchVariants, func(v benchVariant) bool { return v.name == name })
	if i < 0 {
		t.Fatalf("no variant %s", name)
	}
	v := benchVariants[i]
	h, err := histgen.Generate(v.config(ops, clients)).History()
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Engine, opts.PorcupineTimeout, opts.PorcupineMaxOps = EnginePorcupine, time.Minute, 1<<30
	t0 := time.Now()
	p, _ := checkLinearizable(newFacts(h), opts)
	fmt.Printf("PROBE %s ops=%d clients=%d: %s in %v (%s)\n", name, ops, clients, p.Status, time.Since(t0).Round(time.Millisecond), p.Detail)
}
