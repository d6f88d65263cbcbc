package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
)

// The network-speed faults on real servers, through the link proxies: each
// strike recorded and proved in effect as it went in (a measure noted, no
// strike failed), healed; a grant whose answer a delay held back past the
// lease is named as used after it expired, and fencing contains it; a slow
// Redlock node is a missing vote, not a double grant; the proxies alone
// change nothing; on containers as on processes.
func TestNetSpeedCells(t *testing.T) {
	t.Parallel()
	needServer(t)
	needNet(t)
	cases := []struct {
		name    string
		lock    string
		nemesis string
		params  map[string]string
		fence   bool
		docker  bool // on --cluster docker
		verdict checker.Verdict
		explain string // some anomaly's explanation says this
		short   bool   // some grant lacks a vote (counts.short_grants)
	}{
		{name: "a grant held back past its lease is used after it expired", lock: "redis-lua", nemesis: "delay",
			params: map[string]string{"delay-at": "in-flight"}, verdict: checker.Unsafe, explain: "used after it expired"},
		{name: "fencing contains the late grants", lock: "redis-lua", nemesis: "delay", fence: true,
			params: map[string]string{"delay-at": "in-flight"}, verdict: checker.Safe},
		{name: "a slow redlock node is a missing vote", lock: "redlock", nemesis: "slow-node", short: true},
		{name: "the proxies alone change nothing", lock: "zk", nemesis: "proxied", verdict: checker.Safe},
		{name: "on containers, a late grant too", lock: "redis-lua", nemesis: "delay", docker: true,
			params: map[string]string{"delay-at": "in-flight"}, verdict: checker.Unsafe, explain: "used after it expired"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := baseOptions(t, tc.lock, tc.nemesis, int64(300+i))
			o.Params, o.Fence = tc.params, tc.fence
			o.OpTimeout, o.TimeLimit, o.Clients = 3*time.Second, 15*time.Second, 3
			if tc.docker {
				needDocker(t)
				o.Cluster, o.Images = "docker", dockerImages("docker")
			}
			slot(t, o.TimeLimit)
			out, h, verdict, _ := runCell(t, o, tc.verdict, nil)
			landed := verdict == tc.verdict // the faults landed (runCell)
			r := out.Result
			if verdict != "" {
				require.Equal(t, verdict, r.Verdict, "why: %s", r.Why)
			} else {
				require.NotEqual(t, checker.Inconclusive, r.Verdict, "why: %s", r.Why)
			}
			if tc.explain != "" && landed {
				found := false
				var all []string
				for _, a := range r.Anomalies {
					found = found || strings.Contains(a.Explanation, tc.explain)
					all = append(all, a.Explanation)
				}
				require.True(t, found, "no anomaly says %q:\n%s", tc.explain, strings.Join(all, "\n"))
			}
			if tc.short && landed {
				require.Positive(t, r.Counts.ShortGrants)
			}
			measured := 0
			for _, e := range h.Events {
				if e.Type == history.Note && strings.Contains(e.Detail, " measured: ") {
					measured++
				}
			}
			for _, f := range h.Faults {
				require.False(t, f.Failed, "a strike had no effect: %+v", f)
				require.NotEqual(t, history.Never, f.End, "never healed: %+v", f)
				if f.Name == "delay" && !strings.Contains(f.Detail, "on the requests") {
					require.Positive(t, f.Held, "a delay of the answers records its hold: %+v", f)
				}
			}
			if tc.nemesis != "proxied" {
				if landed {
					require.NotEmpty(t, h.Faults)
				}
				require.GreaterOrEqual(t, measured, len(h.Faults)-1, "each strike is measured (the last may be cut by the run's end)")
			}
			assertNothingLeft(t, out.Dir)
			if out.NetID != "" {
				require.Empty(t, netns.Names(out.NetID), "namespaces left behind")
			}
		})
	}
}
