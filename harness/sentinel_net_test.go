package harness_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
)

// Cells of the redis-sentinel topology on the network layer: every data
// node, Sentinel and client in its own namespace of the run.
func TestSentinelNetCells(t *testing.T) {
	t.Parallel()
	needServer(t)
	cases := []struct {
		name    string
		nemesis string
		params  map[string]string
		mod     func(*Options)
		check   func(t *testing.T, r checker.Result, h *history.History)
	}{
		// Every shape the seed draws (isolate-leader is not one of this
		// topology's): whatever the verdict (a split that leaves the
		// master with a minority of the Sentinels and some clients is
		// Sentinel's split brain), the run goes through, every partition
		// heals, and nothing is left behind.
		{name: "sentinel through partitions of every shape", nemesis: "partition",
			mod: func(o *Options) { o.TimeLimit = 10 * time.Second },
			check: func(t *testing.T, r checker.Result, h *history.History) {
				require.Contains(t, []checker.Verdict{checker.Safe, checker.Unsafe, checker.Inconclusive}, r.Verdict)
				require.NotEmpty(t, h.Faults, "no partition in 10 s")
				ends := faultEnds(h)
				for _, f := range h.Faults {
					require.Equal(t, "partition", f.Name)
					require.Equal(t, "healed", ends[f.ID], "%s on %s", f.Detail, f.Target)
					t.Logf("%s: %s", f.Detail, f.Target)
				}
			}},
		// The master, cut off the network right after a grant only it
		// has, keeps that grant; Sentinel promotes a replica that lacks
		// it and hands the lock out again while its holder still works
		// (holds of 3-4 s within a 6 s lease). Healed, the old master
		// comes back with its stale lease and Sentinel demotes it.
		{name: "sentinel with its master isolated grants twice", nemesis: "failover",
			params: map[string]string{"failover": "isolate"}, mod: failoverShape,
			check: func(t *testing.T, r checker.Result, h *history.History) {
				found := kinds(r, "")
				require.Len(t, h.Faults, 1)
				end := faultEnds(h)[h.Faults[0].ID]
				t.Log(end)
				if missedFailover(r, h, time.Duration(h.Info.TTLMillis)*time.Millisecond) {
					// A starved machine: the promotion came after the
					// lease ran out (9.6 s beside two CPU hogs), or
					// never. The recorded history says so: inconclusive
					// is the verdict this run earned.
					t.Logf("the recorded history shows the failover could not give the lock away twice: %s", r.Why)
					return
				}
				require.Equal(t, checker.Unsafe, r.Verdict, "why: %s; anomalies: %v", r.Why, found)
				// The lost grant shows as a double holder, or, when the
				// holder let go before another client was granted (beside
				// two CPU hogs), as a history no order of the operations
				// explains (its release finds the lock gone).
				require.Positive(t, found[string(checker.KindDoubleHolder)]+found[string(checker.KindNonLinearizable)],
					"want a double holder or a non-linearizable history; got %v", found)
				require.Contains(t, end, "isolated (every packet in or out of it dropped)")
				require.Contains(t, end, "came back with its stale data and rejoined as a replica")
				if d, ok := firstAfter(h, r, "failover", string(checker.KindDoubleHolder)); ok {
					t.Logf("first double holder %s after the failover began", d.Round(time.Millisecond))
				}
			}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			needSentinel(t)
			needNet(t)
			o := baseOptions(t, "redis-sentinel", tc.nemesis, int64(500+i))
			o.Params = tc.params
			if tc.mod != nil {
				tc.mod(&o)
			}
			if tc.nemesis == "failover" {
				quietSlot(t, o.TimeLimit)
			} else {
				slot(t, o.TimeLimit)
			}
			start := time.Now()
			out, err := Run(context.Background(), o)
			require.NoError(t, err)
			r := out.Result
			t.Logf("%s in %s (cluster up in %s): %s; anomalies %v", r.Verdict, time.Since(start).Round(time.Millisecond), out.Startup.Round(time.Millisecond), r.Why, kinds(r, ""))
			require.NotEmpty(t, out.NetID, "the run has a network")
			h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
			require.NoError(t, err)
			for _, s := range h.Info.Servers {
				require.True(t, strings.HasPrefix(s, "redis-") || strings.HasPrefix(s, "sentinel-"), s)
			}
			tc.check(t, r, h)
			assertNothingLeft(t, out.Dir)
			assertNoServerLeft(t, out.Dir)
			require.Empty(t, netns.Names(out.NetID), "namespaces left behind")
		})
	}
}

// faultEnds returns the detail of each fault's end event, by fault id.
func faultEnds(h *history.History) map[int64]string {
	out := map[int64]string{}
	for _, e := range h.Events {
		if e.Type == history.FaultEnd {
			out[e.FaultID] = e.Detail
		}
	}
	return out
}
