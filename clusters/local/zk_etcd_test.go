package local

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/internal/testenv"
)

// needTopology skips (or, under CI, fails) when topology's programs are
// missing.
func needTopology(t *testing.T, topology string) {
	t.Helper()
	testenv.Require(t, clusters.Check(topology))
}

func TestEnsembles(t *testing.T) {
	for _, topo := range []string{"zk3", "etcd3"} {
		t.Run(topo, func(t *testing.T) {
			needTopology(t, topo)
			t.Parallel()
			dir := t.TempDir()
			tr, err := runstate.Open("test-"+topo, dir)
			require.NoError(t, err)
			defer tr.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			t0 := time.Now()
			c, err := Backend{}.Start(ctx, clusters.Spec{Topology: topo, Dir: dir, Tracker: tr})
			require.NoError(t, err)
			defer c.Stop(context.Background())
			up := time.Since(t0)
			var rss int64
			for _, n := range c.Nodes() {
				rss += n.(interface{ RSS() int64 }).RSS()
			}
			t.Logf("%s up in %s, %d MB RSS total, %v", topo, up.Round(time.Millisecond), rss>>20, c.Versions())
			l, err := c.(clusters.Leader).Leader(ctx)
			require.NoError(t, err)
			t0 = time.Now()
			require.NoError(t, l.Kill())
			l2, err := c.(clusters.Leader).Leader(ctx)
			require.NoError(t, err)
			require.NotEqual(t, l.Name(), l2.Name())
			t.Logf("%s: killed leader %s, new leader %s after %s", topo, l.Name(), l2.Name(), time.Since(t0).Round(time.Millisecond))
			t0 = time.Now()
			require.NoError(t, l.Restart(ctx))
			t.Logf("%s: %s restarted in %s", topo, l.Name(), time.Since(t0).Round(time.Millisecond))
			pids := []int{}
			for _, n := range c.Nodes() {
				pids = append(pids, n.PID())
			}
			require.NoError(t, c.Stop(context.Background()))
			for _, p := range pids {
				require.Error(t, syscall.Kill(p, 0), "pid %d still alive", p)
			}
		})
	}
}
