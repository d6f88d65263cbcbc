package lostgen

import (
	"io"
	"testing"
)

// BenchmarkWrite measures generating and encoding a 100k-operation
// history of issue 17's shape (50 clients, 1% lost).
func BenchmarkWrite(b *testing.B) {
	for b.Loop() {
		if _, err := Write(io.Discard, Config{Ops: 100_000, Clients: 50, Lost: 0.01, Double: 5, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
