package nemesis

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/internal/testenv"
)

// A clock fault checks, on the real server, that the shift took effect: a
// server whose clock did not move fails the check, one that did passes.
func TestCheckShiftOnRedis(t *testing.T) {
	testenv.Require(t, clusters.Check("redis"))
	testenv.Require(t, clusters.CheckClockShim())
	ctx := context.Background()
	cl, err := local.Backend{}.Start(ctx, clusters.Spec{Topology: "redis", Dir: t.TempDir(), ClockShim: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(ctx) })
	nodes := cl.Nodes()
	require.ErrorIs(t, checkShift(ctx, nodes, 5*time.Second), ErrClockNotShifted, "an unshifted clock passed for a jump")
	require.NoError(t, nodes[0].(clusters.ClockShifter).ShiftClock(5*time.Second))
	require.NoError(t, checkShift(ctx, nodes, 5*time.Second))
	require.ErrorIs(t, checkShift(ctx, nodes, -5*time.Second), ErrClockNotShifted, "a jump forward passed for one back")
	require.NoError(t, nodes[0].(clusters.ClockShifter).ShiftClock(0))
}
