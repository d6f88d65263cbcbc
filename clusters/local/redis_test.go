package local

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/testenv"
)

// The clock shim works with a relative run directory (the CLI's default
// store is ./store): redis-server changes its working directory, and a
// relative offset file left every clock fault without effect. A key with
// a lease expires when its server's clock jumps past it.
func TestRedisClockShimRelativeDir(t *testing.T) {
	testenv.Require(t, clusters.Check("redis"))
	testenv.Require(t, clusters.CheckClockShim())
	t.Chdir(t.TempDir())
	cl, err := Backend{}.Start(context.Background(), clusters.Spec{Topology: "redis", Dir: filepath.Join("store", "run"), ClockShim: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: cl.Addrs()[0]})
	t.Cleanup(func() { _ = c.Close() })
	skew := func() time.Duration {
		now, err := c.Time(ctx).Result()
		require.NoError(t, err)
		return time.Until(now)
	}
	require.InDelta(t, 0, skew().Seconds(), 0.5)
	require.NoError(t, c.Set(ctx, "k", "v", 10*time.Second).Err())
	require.NoError(t, cl.Nodes()[0].(clusters.ClockShifter).ShiftClock(time.Minute))
	require.InDelta(t, 60, skew().Seconds(), 0.5)
	require.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "the key outlived a clock jump past its lease")
	require.NoError(t, cl.Nodes()[0].(clusters.ClockShifter).ShiftClock(0))
	require.InDelta(t, 0, skew().Seconds(), 0.5)
}
