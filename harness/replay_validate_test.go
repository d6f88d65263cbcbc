package harness

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/nemesis"
)

// The other network-speed faults: a replay names the faults its entries
// name; a run that went through the proxies and whose network-speed
// entries were all deleted (or never drawn) replays as proxied, with the
// proxies still in place, and --nemesis must allow for them.
func TestValidateReplayProxied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedule.json")
	delay := nemesis.Entry{Nemesis: nemesis.FaultDelay, Trigger: nemesis.Trigger{AfterGrant: 2}, Target: nemesis.RuleHolder, Length: "1s",
		Params: map[string]string{"direction": "both", "latency": "1.5s", "jitter": "10ms"}}
	slow := nemesis.Entry{Nemesis: nemesis.FaultSlowNode, Trigger: nemesis.Trigger{AfterGrant: 3}, Target: nemesis.RuleAnyServer, Length: "1s",
		Params: map[string]string{"direction": "both", "latency": "1s", "jitter": "0s"}}
	split := nemesis.Entry{Nemesis: "partition", Trigger: nemesis.Trigger{AfterGrant: 4}, Target: nemesis.RuleSplit, Length: "1s",
		Params: map[string]string{"shape": "split"}}
	cases := []struct {
		proxied bool
		faults  []nemesis.Entry
		given   string
		want    []string
		err     string
	}{
		{proxied: true, want: []string{nemesis.FaultProxied}},
		{proxied: true, given: nemesis.FaultProxied, want: []string{nemesis.FaultProxied}},
		{proxied: true, given: nemesis.FaultDelay, want: []string{nemesis.FaultProxied}},
		{proxied: true, given: "pause", err: "ran through the proxies (proxied), which --nemesis pause does not name"},
		{proxied: true, faults: []nemesis.Entry{delay}, want: []string{nemesis.FaultDelay}},
		{proxied: true, faults: []nemesis.Entry{slow, delay}, want: []string{nemesis.FaultDelay, nemesis.FaultSlowNode}},
		{proxied: true, faults: []nemesis.Entry{split}, given: "delay,partition", want: []string{"partition", nemesis.FaultProxied}},
		{faults: []nemesis.Entry{split}, want: []string{"partition"}},
		{want: []string{"none"}},
	}
	for i, tc := range cases {
		sched := nemesis.Schedule{Version: 1, Seed: 3, Proxied: tc.proxied, Faults: tc.faults}
		require.NoError(t, sched.Write(path))
		loaded, err := nemesis.LoadSchedule(path)
		require.NoError(t, err)
		require.Equal(t, tc.proxied, loaded.Proxied, "case %d: written and read", i)
		o := Options{Lock: "redis-lua", Nemesis: tc.given, Seed: 1, TimeLimit: 8 * time.Second, Clients: 5, TTL: time.Second,
			Store: t.TempDir(), Cluster: "local", Quiet: true}
		o.Schedule = path
		_, names, _, err := o.faults()
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		require.Equal(t, tc.want, names, "case %d", i)
	}
}
