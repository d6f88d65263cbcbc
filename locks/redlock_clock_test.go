package locks_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/locks"
)

// A wall-clock step back right after the grant (the clock-client fault):
// go-redsync's validity, on Go's monotonic clock, does not move; the
// wall-clock variant's grows by the step (Redis's description; ports that
// read Date.now() or currentTimeMillis).
func TestRedlockValidityClock(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		startRedis(t) // skips or fails as every server test does
	}
	cl, err := local.Backend{}.Start(context.Background(), clusters.Spec{Topology: "redis5", Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	s := lookup(t, "redlock")
	ttl, step := 2*time.Second, 5*time.Second
	tests := []struct {
		name   string
		params map[string]string
		mono   bool
		left   time.Duration // validity left after the step, about
	}{
		{"go-redsync (monotonic)", nil, true, ttl},
		{"redlock-clock=wall", map[string]string{"redlock-clock": "wall"}, false, ttl + step},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &locks.SkewClock{}
			l, err := s.New(locks.Config{Addrs: cl.Addrs(), Key: "rl-clock-" + tt.name, TTL: ttl, OpTimeout: time.Second, Client: i, Clock: clock, Params: tt.params})
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			lease, err := l.Acquire(context.Background())
			require.NoError(t, err)
			require.Equal(t, tt.mono, lease.Monotonic)
			require.InDelta(t, ttl, lease.Left(clock), float64(100*time.Millisecond))
			clock.SetOffset(-step)
			require.InDelta(t, tt.left, lease.Left(clock), float64(100*time.Millisecond))
		})
	}
}
