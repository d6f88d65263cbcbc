package local

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/testenv"
)

// Every node of a started topology, and the topology itself where it has
// a probe, passes its probe (clusters.Prober); a frozen server does not,
// nor a killed one. A node without the clock shim says so with
// clusters.ErrNoClockShim.
func TestProbe(t *testing.T) {
	for _, topology := range []string{"redis-sentinel", "mysql", "etcd3"} {
		t.Run(topology, func(t *testing.T) {
			testenv.Require(t, clusters.Check(topology))
			t.Parallel()
			cl, err := Backend{}.Start(context.Background(), clusters.Spec{Topology: topology, Dir: runDir(t)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = cl.Stop(context.Background()) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, n := range cl.Nodes() {
				p, ok := n.(clusters.Prober)
				require.True(t, ok, "%s has no probe", n.Name())
				require.NoError(t, p.Probe(ctx), n.Name())
				if cs, ok := n.(clusters.ClockShifter); ok {
					require.ErrorIs(t, cs.ShiftClock(time.Second), clusters.ErrNoClockShim, n.Name())
				}
			}
			if p, ok := cl.(clusters.Prober); ok {
				require.NoError(t, p.Probe(ctx))
			} else {
				require.NotEqual(t, "redis-sentinel", topology, "the Sentinel topology checks its master")
			}

			n := cl.Nodes()[len(cl.Nodes())-1]
			pid := n.PID()
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				return err == nil && strings.Contains(string(b), ") T ")
			}, 5*time.Second, 10*time.Millisecond)
			err = n.(clusters.Prober).Probe(ctx)
			require.ErrorContains(t, err, fmt.Sprintf("%s (pid %d) is in state T", n.Name(), pid))
			require.NoError(t, n.Resume())
			require.NoError(t, n.Kill())
			require.ErrorContains(t, n.(clusters.Prober).Probe(ctx), n.Name()+" is down")
			require.NoError(t, n.Restart(ctx))
			require.Eventually(t, func() bool { return n.(clusters.Prober).Probe(ctx) == nil }, 20*time.Second, 100*time.Millisecond)
		})
	}
}
