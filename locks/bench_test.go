package locks_test

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/locks"
)

// benchCycles times b.N acquire+release cycles of l, one after the other,
// and reports them as cycles/s, which it returns.
func benchCycles(b *testing.B, ctx context.Context, l locks.Lock) float64 {
	b.Helper()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		le, err := l.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Release(ctx, le); err != nil {
			b.Fatal(err)
		}
	}
	cycles := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(cycles, "cycles/s")
	return cycles
}

// BenchmarkAcquireRelease measures one client's acquire+release cycle on a
// local redis-server, for every scheme, and runs redis-benchmark (GET/SET,
// one connection, no pipelining) against the same server in the same run:
// cycles/s of a scheme next to the round trips/s the server gives any
// client. A cycle is two round trips for most schemes (three for
// redis-setnx-expire).
func BenchmarkAcquireRelease(b *testing.B) {
	cl := startRedis(b)
	addr := cl.Addrs()[0]
	ctx := context.Background()
	rb := redisBenchmark(b, addr)
	for _, s := range locks.Schemes {
		if s.Topology != "redis" {
			continue
		}
		for _, fence := range []bool{false, true} {
			name := s.Name
			if fence {
				name += "/fenced"
			}
			b.Run(name, func(b *testing.B) {
				cycles := benchCycles(b, ctx, newLock(b, s, addr, 1, 10*time.Second, fence))
				if rb > 0 {
					b.ReportMetric(rb, "redis-benchmark-req/s")
					trips := 2.0
					if s.Name == "redis-setnx-expire" {
						trips = 3
					}
					b.ReportMetric(trips*cycles/rb, "roundtrips-vs-redis-benchmark")
				}
			})
		}
	}
}

// redisBenchmark returns redis-benchmark's requests/s for SET with one
// connection against addr, or 0 when it is not installed.
func redisBenchmark(b *testing.B, addr string) float64 {
	b.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-benchmark", "-h", host, "-p", port, "-c", "1", "-n", "20000", "-t", "set", "-q").CombinedOutput()
	if err != nil {
		b.Logf("redis-benchmark not run: %v", err)
		return 0
	}
	m := regexp.MustCompile(`SET: ([0-9.]+) requests per second`).FindSubmatch(out)
	if m == nil {
		b.Logf("redis-benchmark said: %s", out)
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
