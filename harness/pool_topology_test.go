package harness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// A run on a pooled cluster (a campaign's) sees the same topology as a run
// on its own: the faults find what the cluster inside the pool's wrapper
// can do (clusters.As). The pool's wrapper once hid it: in the nightly
// campaign the partition fault on redis-sentinel drew every shape instead
// of the split aimed at Sentinel's master (the cell, expected unsafe, was
// safe), and a kill on mysql-replicated did not say whether it took the
// primary (which the checker reads for session locks).
func TestPooledRunsSeeTheTopology(t *testing.T) {
	t.Parallel()
	needServer(t)
	t.Run("sentinel partition is the aimed split", func(t *testing.T) {
		needSentinel(t)
		needNet(t)
		t.Parallel()
		slot(t, 8*time.Second) // baseOptions' time limit
		h := runOnPool(t, "redis-sentinel", "partition", "", 1)
		for _, f := range h.Faults {
			require.Equal(t, "partition", f.Name)
			// Without --param partition, Sentinel's partition is the split
			// with the master on the minority side, and only that.
			require.True(t, strings.HasPrefix(f.Detail, "split for "), "not the aimed split: %s on %s", f.Detail, f.Target)
			t.Logf("%s: %s", f.Detail, f.Target)
		}
	})
	t.Run("mysql-replicated kill names the primary or a replica", func(t *testing.T) {
		needMariaDB(t, "mysql-replicated")
		t.Parallel()
		slot(t, 8*time.Second) // baseOptions' time limit
		h := runOnPool(t, "mysql-get-lock", "kill", "mysql-replicated", 2)
		for _, f := range h.Faults {
			require.Equal(t, "kill", f.Name)
			named := strings.HasSuffix(f.Detail, history.KilledPrimary) || strings.HasSuffix(f.Detail, history.KilledReplica)
			require.True(t, named, "the kill of %s does not say whether it took the primary: %s", f.Target, f.Detail)
			t.Logf("%s: %s", f.Target, f.Detail)
		}
	})
}

// runOnPool runs lock under nem on a cluster of a pool of its own and
// returns the run's history, with at least one fault in it.
func runOnPool(t *testing.T, lock, nem, topology string, seed int64) *history.History {
	t.Helper()
	pool := NewPool(t.TempDir())
	defer pool.Close()
	o := baseOptions(t, lock, nem, seed)
	o.Topology, o.Pool = topology, pool
	out, err := Run(context.Background(), o)
	require.NoError(t, err)
	require.NotEmpty(t, out.Cluster, "the run did not take a pooled cluster")
	h, err := history.Load(out.Dir + "/history.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, h.Faults, "no fault in %s", o.TimeLimit)
	t.Logf("%s in %s: %s", out.Result.Verdict, time.Duration(out.Result.Counts.DurationNs).Round(time.Millisecond), out.Result.Why)
	return h
}
