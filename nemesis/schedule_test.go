package nemesis

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const goodSchedule = `{"version":1,"seed":7,"replayed_from":"","faults":[
 {"nemesis":"pause","trigger":{"after_grant":3},"target":"holder","length":"2.5s","point":"after-grant","params":{},"fired":true,"fault_id":1},
 {"nemesis":"kill","trigger":{"after_grant":5},"target":"granters","length":"800ms","point":"","params":{}},
 {"nemesis":"partition","trigger":{"at":"3.2s"},"target":"majority|minority","length":"3s","point":"","params":{"shape":"split"}},
 {"nemesis":"clock","trigger":{"after_grant":9},"target":"granters","length":"4s","point":"","params":{"jump":"+2.5s"}}
]}`

func TestParseScheduleReadsEveryField(t *testing.T) {
	s, err := ParseSchedule([]byte(goodSchedule))
	require.NoError(t, err)
	require.Equal(t, int64(7), s.Seed)
	require.Len(t, s.Faults, 4)
	require.Equal(t, Entry{Nemesis: "pause", Trigger: Trigger{AfterGrant: 3}, Target: RuleHolder, Length: "2.5s", Point: "after-grant",
		Params: map[string]string{}, Fired: true, FaultID: 1}, s.Faults[0])
	require.Equal(t, "3.2s", s.Faults[2].Trigger.At)
	require.Equal(t, []string{"pause", "kill", "clock", "partition"}, s.Names(), "registry order")
}

func TestParseScheduleRefusesBadFiles(t *testing.T) {
	entry := func(e string) string { return `{"version":1,"seed":1,"replayed_from":"","faults":[` + e + `]}` }
	cases := []struct{ name, text, want string }{
		{"not json", "pause at 3s", "invalid character"},
		{"bad version", `{"version":2,"seed":1,"faults":[]}`, "version 2: want 1"},
		{"unknown key", `{"version":1,"seed":1,"faults":[],"extra":1}`, `unknown field "extra"`},
		{"unknown nemesis", entry(`{"nemesis":"meteor","trigger":{"after_grant":1},"target":"holder","length":"1s"}`), `unknown nemesis "meteor"`},
		{"none is no fault", entry(`{"nemesis":"none","trigger":{"after_grant":1},"target":"holder","length":"1s"}`), `unknown nemesis "none"`},
		{"bad length", entry(`{"nemesis":"kill","trigger":{"after_grant":1},"target":"granters","length":"soon"}`), `length "soon"`},
		{"negative length", entry(`{"nemesis":"kill","trigger":{"after_grant":1},"target":"granters","length":"-1s"}`), `length "-1s"`},
		{"unknown trigger", entry(`{"nemesis":"kill","trigger":{"after_release":1},"target":"granters","length":"1s"}`), `unknown trigger "after_release"`},
		{"no trigger", entry(`{"nemesis":"kill","trigger":{},"target":"granters","length":"1s"}`), "no trigger"},
		{"two triggers", entry(`{"nemesis":"kill","trigger":{"after_grant":2,"at":"1s"},"target":"granters","length":"1s"}`), "both after_grant and at"},
		{"bad at", entry(`{"nemesis":"kill","trigger":{"at":"later"},"target":"granters","length":"1s"}`), `trigger at "later"`},
		{"grant zero", entry(`{"nemesis":"kill","trigger":{"after_grant":-2},"target":"granters","length":"1s"}`), "want a grant number from 1"},
		{"server name as target", entry(`{"nemesis":"kill","trigger":{"after_grant":1},"target":"redis-1","length":"1s"}`), `unknown target rule "redis-1"`},
		{"rule of another fault", entry(`{"nemesis":"pause","trigger":{"after_grant":1},"target":"leader","length":"1s","point":"after-grant"}`), `unknown target rule "leader"`},
		{"pause without point", entry(`{"nemesis":"pause","trigger":{"after_grant":1},"target":"holder","length":"1s"}`), "no point"},
		{"unknown shape", entry(`{"nemesis":"partition","trigger":{"at":"1s"},"target":"bridge","length":"1s","params":{"shape":"moat"}}`), `unknown shape "moat"`},
		{"shape and rule disagree", entry(`{"nemesis":"partition","trigger":{"at":"1s"},"target":"leader","length":"1s","params":{"shape":"split"}}`), "shape split aims at"},
		{"clock without jump", entry(`{"nemesis":"clock","trigger":{"after_grant":1},"target":"granters","length":"1s"}`), "params jump"},
		{"jitter as long as the delay", entry(`{"nemesis":"delay","trigger":{"after_grant":1},"target":"holder","length":"1s","params":{"direction":"both","latency":"50ms","jitter":"50ms"}}`), `params jitter "50ms": want less than its latency (50ms)`},
		{"bad failover mode", entry(`{"nemesis":"failover","trigger":{"after_grant":1},"target":"primary","length":"1s","params":{"mode":"pray"}}`), "unknown failover mode"},
	}
	refusesSchedules(t, cases)
}

// refusesSchedules checks that each case's schedule is refused in one
// line saying want.
func refusesSchedules(t *testing.T, cases []struct{ name, text, want string }) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSchedule([]byte(tc.text))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// What a shrinker does to a schedule (delete faults, shorten lengths)
// leaves a schedule that loads, and Write and LoadSchedule round-trip it.
func TestEditedScheduleStaysValid(t *testing.T) {
	s, err := ParseSchedule([]byte(goodSchedule))
	require.NoError(t, err)
	s.Faults = append(s.Faults[:1], s.Faults[2:]...)
	s.Faults[0].Length = "300ms"
	path := filepath.Join(t.TempDir(), ScheduleFile)
	require.NoError(t, s.Write(path))
	back, err := LoadSchedule(path)
	require.NoError(t, err)
	require.Equal(t, s, back)
	require.Equal(t, []string{"pause", "clock", "partition"}, back.Names())

	s.Faults = nil
	require.NoError(t, s.Write(path))
	back, err = LoadSchedule(path)
	require.NoError(t, err)
	require.Empty(t, back.Names())
	require.Empty(t, back.Faults)
}

func TestLoadScheduleNamesTheFile(t *testing.T) {
	_, err := LoadSchedule(filepath.Join(t.TempDir(), "nope.json"))
	require.ErrorContains(t, err, "--schedule")
	require.ErrorContains(t, err, "nope.json")
}

// A replay takes each fault's entries in order once its trigger came,
// keeps the ones that never came as not fired, and says where a fault
// struck past its trigger.
func TestReplayTakesEntriesInOrder(t *testing.T) {
	s, err := ParseSchedule([]byte(goodSchedule))
	require.NoError(t, err)
	s.Faults = append(s.Faults, Entry{Nemesis: "pause", Trigger: Trigger{AfterGrant: 1_000_000}, Target: RuleHolder, Length: "1s", Point: "after-grant"})
	env := &Env{Seed: 3, Replay: &s}

	_, ok := env.dueAt("pause", 2)
	require.False(t, ok, "grant 2 is before the first pause's trigger")
	first, ok := env.dueAt("pause", 4)
	require.True(t, ok, "grant 4 is past grant 3: the first opportunity after it")
	require.Equal(t, 0, first.idx)
	env.fired(first, 11)
	_, ok = env.dueAt("pause", 40)
	require.False(t, ok, "the second pause's trigger never comes")
	kill, ok := env.dueAt("kill", 5)
	require.True(t, ok)
	env.fired(kill, 12)
	_, ok = env.dueAt("partition", 100)
	require.False(t, ok, "an at trigger 3.2s after the faults began has not come")

	out := env.Schedule()
	require.Equal(t, 3, int(out.Seed))
	require.Len(t, out.Faults, 5, "every entry is written, fired or not")
	require.True(t, out.Faults[0].Fired)
	require.Equal(t, int64(11), out.Faults[0].FaultID)
	require.Equal(t, &Trigger{AfterGrant: 4}, out.Faults[0].FiredAt)
	require.True(t, out.Faults[1].Fired)
	require.Nil(t, out.Faults[1].FiredAt, "struck at its own trigger")
	for _, i := range []int{2, 3, 4} {
		require.False(t, out.Faults[i].Fired, "entry %d", i)
		require.Zero(t, out.Faults[i].FaultID)
	}
}

// A drawn run writes what it drew, in the order it struck; a fault before
// the first grant is triggered by the time.
func TestDrawnEntriesAreWritten(t *testing.T) {
	env := &Env{Seed: 9}
	a := env.drawn(Entry{Nemesis: "kill", Trigger: env.triggerAt(0), Target: RuleAnyServer, Length: dur(812345 * time.Microsecond)})
	env.fired(a, 1)
	env.drawn(Entry{Nemesis: "pause", Trigger: env.triggerAt(6), Target: RuleHolder, Length: "2s", Point: "after-grant"})
	out := env.Schedule()
	require.Equal(t, "", out.ReplayedFrom)
	require.Len(t, out.Faults, 2)
	require.NotEmpty(t, out.Faults[0].Trigger.At)
	require.Equal(t, "812ms", out.Faults[0].Length)
	require.True(t, out.Faults[0].Fired)
	require.Equal(t, int64(6), out.Faults[1].Trigger.AfterGrant)
	require.False(t, out.Faults[1].Fired, "drawn but never struck")
	for _, e := range out.Faults {
		require.NoError(t, e.Validate(), e.Nemesis)
	}
}
