package campaigns_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/reports"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		k, n int
		err  string
	}{
		{"1/1", 1, 1, ""},
		{"2/4", 2, 4, ""},
		{" 3 / 4 ", 3, 4, ""},
		{"0/2", 0, 0, "K must be 1..2"},
		{"3/2", 0, 0, "K must be 1..2"},
		{"2/0", 0, 0, "N must be 1..1000"},
		{"1/1001", 0, 0, "N must be 1..1000"},
		{"x", 0, 0, "want K/N"},
		{"1/2/3", 0, 0, "want K/N"},
		{"", 0, 0, "want K/N"},
	} {
		k, n, err := campaigns.ParseShard(tc.in)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, [2]int{tc.k, tc.n}, [2]int{k, n}, tc.in)
	}
}

// allPlans are campaigns to split: the nightly one, every scheme under
// every fault, and one with 3 runs per cell.
func allPlans(t *testing.T, env campaigns.Environment) map[string]*reports.Campaign {
	t.Helper()
	cfg, err := campaigns.LoadConfig("nightly.yaml")
	require.NoError(t, err)
	nightly, err := campaigns.PlanConfig(cfg, env)
	require.NoError(t, err)
	all, err := campaigns.PlanLists(campaigns.Lists{Locks: "all", Nemeses: "all", Settings: campaigns.Settings{TimeLimit: campaigns.Duration(5 * time.Second)}}, env)
	require.NoError(t, err)
	all.Runs = 1
	runs3, err := campaigns.PlanLists(campaigns.Lists{Locks: "redis-lua,redis-setnx,zk,mysql-get-lock", Nemeses: "none,pause,kill,failover", Settings: campaigns.Settings{TimeLimit: campaigns.Duration(5 * time.Second)}}, env)
	require.NoError(t, err)
	runs3.Runs, runs3.Seed = 3, 11
	return map[string]*reports.Campaign{"nightly": nightly, "all": all, "runs3": runs3}
}

type runKey struct {
	id   string
	seed int64
}

// TestSplitShard: N shards hold every run of the campaign exactly once,
// with its seeds; the split depends on the plan alone (a machine that
// skips cells splits alike, with the same plan hash); runs that can share
// a cluster stay together except to cut a group bigger than a fair share;
// no shard gets much more than a fair share.
func TestSplitShard(t *testing.T) {
	full := allPlans(t, campaigns.Environment{Cluster: campaigns.ClusterLocal})
	poor := allPlans(t, campaigns.Environment{Cluster: campaigns.ClusterLocal, NetErr: errors.New("no root"), ClockErr: errors.New("no libfaketime"),
		Missing: func(string) []clusters.Requirement { return []clusters.Requirement{{Binary: "x", Package: "x"}} }})
	for name, c := range full {
		skipped := 0
		for _, cell := range poor[name].Cells {
			if cell.Status == reports.CellSkipped {
				skipped++
			}
		}
		require.Positive(t, skipped, name)
		require.Equal(t, campaigns.PlanHash(c), campaigns.PlanHash(poor[name]), name)
		for _, n := range []int{1, 2, 3, 4, 7, 500} {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				owner := map[runKey]int{}
				keys := map[string]bool{}
				pairs := map[string]bool{} // shard + pool key
				load := make([]time.Duration, n)
				var total time.Duration
				for k := 1; k <= n; k++ {
					part, sh, err := campaigns.SplitShard(c, k, n)
					require.NoError(t, err)
					_, again, err := campaigns.SplitShard(poor[name], k, n)
					require.NoError(t, err)
					require.Equal(t, sh.Cells, again.Cells, "the split depends on the machine")
					require.Equal(t, sh.Plan, again.Plan)
					require.Equal(t, c.Rows, part.Rows)
					require.Equal(t, c.Columns, part.Columns)
					require.Len(t, part.Cells, len(sh.Cells))
					require.Equal(t, len(c.Cells), sh.PlanCells)
					require.Equal(t, len(c.Cells)*c.Runs, sh.PlanRuns)
					for i, sc := range sh.Cells {
						require.Equal(t, c.Cells[sc.Ordinal].ID, sc.ID)
						require.Equal(t, sc.ID, part.Cells[i].ID)
						require.NotEmpty(t, sc.Seeds)
						if i > 0 {
							require.Greater(t, sc.Ordinal, sh.Cells[i-1].Ordinal, "cells in the campaign's order")
						}
						for _, seed := range sc.Seeds {
							require.True(t, seed >= c.Seed && seed < c.Seed+int64(c.Runs), "seed %d", seed)
							rk := runKey{sc.ID, seed}
							_, dup := owner[rk]
							require.False(t, dup, "%v in two shards", rk)
							owner[rk] = k
							cell := c.Cells[sc.Ordinal]
							if cell.Status == reports.CellNA {
								continue
							}
							o, err := campaigns.Options2Harness(&cell, seed, "")
							require.NoError(t, err)
							if key := harness.PoolKey(o); key != "" {
								keys[key] = true
								pairs[fmt.Sprint(k, key)] = true
							}
							load[k-1] += time.Duration(cell.TimeLimitNs)
							total += time.Duration(cell.TimeLimitNs)
						}
					}
				}
				require.Len(t, owner, len(c.Cells)*c.Runs, "every run in a shard")
				// A pool group is cut only where it exceeds a fair share.
				require.LessOrEqual(t, len(pairs), len(keys)+n, "clusters started")
				if n == 1 {
					require.Len(t, pairs, len(keys))
				}
				// Balance (largest piece first): no shard above a fair
				// share by more than the largest piece of a group, itself
				// at most a fair share and one more run.
				var longest time.Duration
				for _, cell := range c.Cells {
					longest = max(longest, time.Duration(cell.TimeLimitNs))
				}
				t.Logf("%d runs, %d pool groups -> %d (shard, group) pairs; fair share %s, shards %v", len(owner), len(keys), len(pairs), total/time.Duration(n), load)
				for k, l := range load {
					require.LessOrEqual(t, l, 2*total/time.Duration(n)+longest, "shard %d of %d: %s of %s", k+1, n, l, total)
				}
			})
		}
	}
}

// TestPlanHashChanges: anything the config decides changes the plan's
// identity.
func TestPlanHashChanges(t *testing.T) {
	base := allPlans(t, campaigns.Environment{Cluster: campaigns.ClusterLocal})["runs3"]
	h := campaigns.PlanHash(base)
	for name, change := range map[string]func(c *reports.Campaign){
		"seed":       func(c *reports.Campaign) { c.Seed++ },
		"runs":       func(c *reports.Campaign) { c.Runs++ },
		"cluster":    func(c *reports.Campaign) { c.Cluster = campaigns.ClusterDocker },
		"stop early": func(c *reports.Campaign) { f := false; c.StopEarly = &f },
		"time limit": func(c *reports.Campaign) { c.Cells[0].TimeLimitNs++ },
		"expect":     func(c *reports.Campaign) { c.Cells[1].Expect = reports.ExpectSafe },
		"params":     func(c *reports.Campaign) { c.Cells[2].Params = map[string]string{"pause": "1..2"} },
		"a cell":     func(c *reports.Campaign) { c.Cells = c.Cells[1:] },
	} {
		c := *base
		c.Cells = append([]reports.Cell(nil), base.Cells...)
		change(&c)
		require.NotEqual(t, h, campaigns.PlanHash(&c), name)
	}
	// What the machine did is no part of it.
	c := *base
	c.Cells = append([]reports.Cell(nil), base.Cells...)
	c.Cells[0].Status, c.Cells[0].Reason = reports.CellSkipped, "no root"
	c.Cells[0].Runs = []reports.CellRun{{Seed: 11}}
	c.WallNs, c.Started = 5, "now"
	require.Equal(t, h, campaigns.PlanHash(&c))
}
