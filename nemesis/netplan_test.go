package nemesis

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/clusters/proxy"
)

// A network-speed strike's toxic goes into its entry's params and comes
// back the same from them: what a replay puts on the links is what the
// drawn run put on.
func TestToxicParamsRoundTrip(t *testing.T) {
	cases := []struct {
		fault string
		t     proxy.Toxic
	}{
		{FaultDelay, proxy.Toxic{Kind: proxy.Delay, Direction: proxy.Downstream, Latency: 1234 * time.Millisecond, Jitter: 10 * time.Millisecond}},
		{FaultSlowNode, proxy.Toxic{Kind: proxy.Delay, Direction: proxy.Both, Latency: 600 * time.Millisecond}},
		{FaultStall, proxy.Toxic{Kind: proxy.Stall, Direction: proxy.Both}},
		{FaultReset, proxy.Toxic{Kind: proxy.Reset, Direction: proxy.Upstream}},
		{FaultBandwidth, proxy.Toxic{Kind: proxy.Bandwidth, Direction: proxy.Both, RateKB: 3}},
		{FaultLoss, proxy.Toxic{Kind: proxy.Loss, Direction: proxy.Both, Share: 0.25}},
	}
	for _, tc := range cases {
		t.Run(tc.fault, func(t *testing.T) {
			e := Entry{Nemesis: tc.fault, Trigger: Trigger{AfterGrant: 2}, Target: rulesOf[tc.fault][0], Length: "2s", Params: toxicParams(tc.t)}
			require.NoError(t, e.Validate())
			back, err := toxicOf(e)
			require.NoError(t, err)
			require.Equal(t, tc.t, back)
		})
	}
}

// A network-speed entry's rule and toxic are checked as it is loaded: one
// line naming what is wrong.
func TestParseScheduleRefusesBadToxics(t *testing.T) {
	entry := func(e string) string { return `{"version":1,"seed":1,"replayed_from":"","faults":[` + e + `]}` }
	cases := []struct{ name, text, want string }{
		{"delay without latency", entry(`{"nemesis":"delay","trigger":{"after_grant":1},"target":"acquirer","length":"1s","params":{"direction":"downstream"}}`), `params latency ""`},
		{"negative latency", entry(`{"nemesis":"delay","trigger":{"after_grant":1},"target":"holder","length":"1s","params":{"latency":"-1s"}}`), `params latency "-1s"`},
		{"bad jitter", entry(`{"nemesis":"delay","trigger":{"after_grant":1},"target":"holder","length":"1s","params":{"latency":"1s","jitter":"lots"}}`), `params jitter "lots"`},
		{"unknown direction", entry(`{"nemesis":"stall","trigger":{"after_grant":1},"target":"holder","length":"1s","params":{"direction":"sideways"}}`), `unknown direction "sideways"`},
		{"no rate", entry(`{"nemesis":"bandwidth","trigger":{"after_grant":1},"target":"holder","length":"1s","params":{}}`), `params rate ""`},
		{"share of one", entry(`{"nemesis":"loss","trigger":{"after_grant":1},"target":"acquirer","length":"1s","params":{"share":"1"}}`), `params share "1"`},
		{"slow-node at a client", entry(`{"nemesis":"slow-node","trigger":{"after_grant":1},"target":"acquirer","length":"1s","params":{"latency":"1s"}}`), `unknown target rule "acquirer"`},
		{"delay at a server", entry(`{"nemesis":"delay","trigger":{"after_grant":1},"target":"granters","length":"1s","params":{"latency":"1s"}}`), `unknown target rule "granters"`},
		{"proxied strikes nothing", entry(`{"nemesis":"proxied","trigger":{"after_grant":1},"target":"holder","length":"1s"}`), `unknown nemesis "proxied"`},
	}
	refusesSchedules(t, cases)
}

// Drawn strikes are entered as they strike, with the toxic rounded as the
// entry records it; a replayed one is the entry given.
func TestSpeedPlanEntered(t *testing.T) {
	env := &Env{Seed: 5, TTL: time.Second}
	s := &striker{env: env, fault: FaultDelay}
	tox := proxy.Toxic{Kind: proxy.Delay, Direction: proxy.Downstream, Latency: 1500 * time.Millisecond}
	got := s.enter(speedPlan{rule: RuleAcquirer, grant: 4, t: tox, d: 3 * time.Second})
	require.Equal(t, Entry{Nemesis: FaultDelay, Trigger: Trigger{AfterGrant: 4}, Target: RuleAcquirer, Length: "3s",
		Params: map[string]string{"direction": "downstream", "latency": "1.5s", "jitter": "0s"}}, got.Entry)
	require.Len(t, env.Schedule().Faults, 1)

	replayed := strike{idx: 0, Entry: got.Entry}
	pl := replayPlan(replayed, 6)
	require.Equal(t, tox, pl.t)
	require.Equal(t, 3*time.Second, pl.d)
	require.Equal(t, RuleAcquirer, pl.rule)
	require.Equal(t, got.Entry, s.enter(pl).Entry, "a replayed plan strikes its entry")
	require.Len(t, env.Schedule().Faults, 1, "and enters nothing new")
}

// Every fault that strikes is schedulable (it has targeting rules, so its
// strikes are written to schedule.json and replayed); none and proxied,
// which strike nothing, are not.
func TestEveryStrikingFaultIsSchedulable(t *testing.T) {
	for _, i := range All {
		_, ok := rulesOf[i.Name]
		strikes := i.Name != "none" && i.Name != FaultProxied
		require.Equal(t, strikes, ok, "%s: schedulable", i.Name)
	}
}
