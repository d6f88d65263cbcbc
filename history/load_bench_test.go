package history_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/lostgen"
)

// BenchmarkLoad loads issue 17's 1M-operation history (internal/lostgen:
// 50 clients, 1% lost) lean (Load, the path of `locktest check`) and whole
// (Parse: every event kept, the path before), and reports the heap the
// loaded history holds (live-MB, after a collection).
//
//	go test ./history/ -run XXX -bench Load -benchtime 3x -benchmem
func BenchmarkLoad(b *testing.B) {
	if testing.Short() {
		b.Skip("a 1M-operation history: not with -short")
	}
	dir := filepath.Join(b.TempDir(), "run")
	if _, err := lostgen.WriteDir(dir, lostgen.Config{Seed: 1, Ops: 1_000_000, Clients: 50, Lost: 0.01}); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "history.jsonl")
	for _, c := range []struct {
		name string
		load func() (*history.History, error)
	}{
		{"lean", func() (*history.History, error) { return history.Load(path) }},
		{"whole", func() (*history.History, error) {
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return history.Parse(f)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var live uint64
			for range b.N {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				h, err := c.load()
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				live = max(live, after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc))
				if len(h.Ops) < 1_000_000 {
					b.Fatalf("%d operations", len(h.Ops))
				}
				runtime.KeepAlive(h)
			}
			b.ReportMetric(float64(live)/(1<<20), "live-MB")
		})
	}
}
