package harness_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/workloads"
)

// Cells of the multi-node and network faults, each against real servers.
func TestNetworkAndClockCells(t *testing.T) {
	t.Parallel()
	needServer(t)
	cases := []struct {
		name    string
		lock    string
		nemesis string
		params  map[string]string
		opTime  time.Duration
		hold    workloads.Range // the default when zero
		limit   time.Duration   // the default when zero
		ttl     time.Duration   // the default when zero
		need    func(*testing.T)
		verdict checker.Verdict
		want    []string
		cause   string // some double holder has this cause (lease-contract)
		never   string // and none has this one
	}{
		{name: "redlock without faults is safe", lock: "redlock", nemesis: "none", verdict: checker.Safe},
		{name: "redlock under server clock jumps grants twice", lock: "redlock", nemesis: "clock", need: needFaketime,
			verdict: checker.Unsafe, want: []string{string(checker.KindDoubleHolder)}, cause: string(checker.CauseLeaseBroken)},
		{name: "single redis under a clock jump grants twice", lock: "redis-lua", nemesis: "clock", need: needFaketime,
			verdict: checker.Unsafe, want: []string{string(checker.KindDoubleHolder)}, cause: string(checker.CauseLeaseBroken)},
		// A grant whose reply is held up by the network past the lease,
		// to a client whose timeout is longer than the lease: the client
		// starts using a lock that already expired.
		{name: "lua with a lost grant reply holds an expired lock", lock: "redis-lua", nemesis: "partition",
			params: map[string]string{"partition": "lost-reply"}, opTime: 10 * time.Second, need: needNet,
			// The late reply's holder used an expired lease: by design.
			verdict: checker.Unsafe, want: []string{string(checker.KindDoubleHolder)}, never: string(checker.CauseLeaseBroken)},
		// Kleppmann's restart without persistence: the kill takes just
		// enough of the lease's granting servers, which come back empty
		// while the holder still holds.
		{name: "redlock whose granting servers restart empty grants twice", lock: "redlock", nemesis: "kill",
			// Granted twice: not linearizable. A double holder too unless
			// the first holder's own validity ran out before the second grant.
			hold: workloads.Range{Min: time.Second, Max: 1800 * time.Millisecond}, ttl: 2 * time.Second, limit: 12 * time.Second,
			verdict: checker.Unsafe, want: []string{string(checker.KindNonLinearizable)}},
		// A partition that isolates the holder of a renewed lease from
		// Redis: its watchdog cannot renew, the lease runs out and another
		// client takes the lock while the holder, whose hold outlasts the
		// TTL, goes on. The same holds without the fault stay safe
		// (TestRedisMultiCells has the watchdog renewing under pauses).
		{name: "redisson holder cut from redis past its lease has a double holder", lock: "redisson", nemesis: "partition",
			params: map[string]string{"partition": "isolate-holder"}, need: needNet,
			hold: workloads.Range{Min: 1200 * time.Millisecond, Max: 1400 * time.Millisecond}, limit: 15 * time.Second, verdict: checker.Unsafe, want: []string{string(checker.KindDoubleHolder)}},
		{name: "redisson holds longer than the TTL, renewed, stay safe", lock: "redisson", nemesis: "none",
			hold: workloads.Range{Min: 1200 * time.Millisecond, Max: 1400 * time.Millisecond}, limit: 15 * time.Second, verdict: checker.Safe},
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
			if tc.hold.Max > 0 {
				o.Hold = tc.hold
			}
			if tc.limit > 0 {
				o.TimeLimit = tc.limit
			}
			if tc.ttl > 0 {
				o.TTL = tc.ttl
			}
			if tc.opTime > 0 {
				// The lost-reply cell: fewer contenders, so that the
				// acquire the fault is aimed at wins more often, and time
				// for several tries.
				o.OpTimeout = tc.opTime
				o.Clients = 3
				o.TimeLimit = 14 * time.Second
			}
			slot(t, o.TimeLimit)
			out, _, verdict, want := runCell(t, o, tc.verdict, tc.want)
			r := out.Result
			found := kinds(r, "")
			if verdict != "" {
				require.Equal(t, verdict, r.Verdict, "why: %s; anomalies: %v", r.Why, found)
			}
			for _, k := range want {
				require.Positive(t, found[k], "want a %s anomaly; got %v", k, found)
			}
			causes := map[string]int{}
			for _, a := range r.Anomalies {
				if a.Kind == checker.KindDoubleHolder {
					causes[string(a.Cause)]++
				}
			}
			if tc.cause != "" && verdict == tc.verdict {
				require.Positive(t, causes[tc.cause], "want a %s double holder; got %v", tc.cause, causes)
			}
			if tc.never != "" {
				require.Zero(t, causes[tc.never], "want no %s double holder; got %v", tc.never, causes)
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
	_, err := o.Validate()
	require.ErrorContains(t, err, "lock redlock cannot hand out fencing tokens")
}
