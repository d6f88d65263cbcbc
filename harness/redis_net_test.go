package harness

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/netns"
)

func needNet(t *testing.T) {
	t.Helper()
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("network layer unavailable under CI: %v", err)
		}
		t.Skip(err.Error())
	}
}

func needFaketime(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(clusters.FaketimeLib); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("libfaketime not installed under CI: %v", err)
		}
		t.Skip("libfaketime not installed: apt-get install -y libfaketime")
	}
}

// Cells of the multi-node and network faults, each against real servers.
func TestNetworkAndClockCells(t *testing.T) {
	needServer(t)
	cases := []struct {
		name    string
		lock    string
		nemesis string
		params  map[string]string
		opTime  time.Duration
		need    func(*testing.T)
		verdict checker.Verdict
		want    []string
	}{
		{name: "redlock without faults is safe", lock: "redlock", nemesis: "none", verdict: checker.Safe},
		{name: "redlock under server clock jumps grants twice", lock: "redlock", nemesis: "clock", need: needFaketime,
			verdict: checker.Unsafe, want: []string{checker.KindDoubleHolder}},
		{name: "single redis under a clock jump grants twice", lock: "redis-lua", nemesis: "clock", need: needFaketime,
			verdict: checker.Unsafe, want: []string{checker.KindDoubleHolder}},
		// A grant whose reply is held up by the network past the lease,
		// to a client whose timeout is longer than the lease: the client
		// starts using a lock that already expired.
		{name: "lua with a lost grant reply holds an expired lock", lock: "redis-lua", nemesis: "partition",
			params: map[string]string{"partition": "lost-reply"}, opTime: 10 * time.Second, need: needNet,
			verdict: checker.Unsafe, want: []string{checker.KindDoubleHolder}},
		{name: "redlock through partitions of every shape", lock: "redlock", nemesis: "partition",
			params: map[string]string{"partition": "isolate-server,split,bridge,holder-minority"}, need: needNet},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.need != nil {
				tc.need(t)
			}
			o := baseOptions(t, tc.lock, tc.nemesis, int64(200+i))
			o.Params = tc.params
			if tc.opTime > 0 {
				// The lost-reply cell: fewer contenders, so that the
				// acquire the fault is aimed at wins more often, and time
				// for several tries.
				o.OpTimeout = tc.opTime
				o.Clients = 3
				o.TimeLimit = 14 * time.Second
			}
			out, err := Run(context.Background(), o)
			require.NoError(t, err)
			r := out.Result
			found := kinds(r, "")
			if tc.verdict != "" {
				require.Equal(t, tc.verdict, r.Verdict, "why: %s; anomalies: %v", r.Why, found)
			}
			for _, k := range tc.want {
				require.Positive(t, found[k], "want a %s anomaly; got %v", k, found)
			}
			assertNothingLeft(t, out.Dir)
			if out.NetID != "" {
				require.Empty(t, netns.Names(out.NetID), "namespaces left behind")
			}
		})
	}
}

func TestRedlockHasNoToken(t *testing.T) {
	o := baseOptions(t, "redlock", "none", 1)
	o.Fence = true
	_, _, _, err := o.Validate()
	require.ErrorContains(t, err, "lock redlock cannot hand out fencing tokens")
}
