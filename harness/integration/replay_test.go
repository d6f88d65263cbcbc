package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
)

// faultStart is what a replay must repeat of a fault-start event: the
// fault, its targeting rule, its point and its length (not its time, nor
// the server or client the rule picked).
type faultStart struct {
	Fault, Rule, Point, Length string
	ID                         int64
}

func (f faultStart) String() string {
	return fmt.Sprintf("%s rule=%s point=%s length=%s", f.Fault, f.Rule, f.Point, f.Length)
}

func faultStarts(t *testing.T, dir string) (*history.History, []faultStart) {
	t.Helper()
	h, err := history.Load(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	var out []faultStart
	for _, e := range h.Events {
		if e.Type == history.FaultStart {
			out = append(out, faultStart{e.Fault, e.Rule, e.Point, e.Length, e.FaultID})
		}
	}
	return h, out
}

// replayCompares runs o, then replays its schedule.json (with one more
// fault whose trigger cannot come) with the same workload settings and a
// longer time limit, and checks that the replay injected the same faults,
// rules, points and lengths in the same order, and recorded the extra
// fault as not fired.
func replayCompares(t *testing.T, o Options) {
	t.Helper()
	sched, _ := drawnSchedule(t, o)
	replayChecks(t, o, sched)
}

// drawnSchedule runs o and returns its schedule.json, checked against its
// history: one fired entry per fault, in the history's order.
func drawnSchedule(t *testing.T, o Options) (nemesis.Schedule, []faultStart) {
	t.Helper()
	first, err := Run(context.Background(), o)
	require.NoError(t, err)
	_, drawn := faultStarts(t, first.Dir)
	sched, err := nemesis.LoadSchedule(filepath.Join(first.Dir, nemesis.ScheduleFile))
	require.NoError(t, err)
	require.Equal(t, o.Seed, sched.Seed)
	require.Empty(t, sched.ReplayedFrom)
	require.NotEmpty(t, drawn, "the first run injected no fault: nothing to replay")
	t.Logf("drawn: %v", strs(drawn))
	require.Len(t, sched.Faults, len(drawn), "one entry per fault the run injected")
	for i, e := range sched.Faults {
		require.True(t, e.Fired, "entry %d", i)
		require.Equal(t, drawn[i], entryStart(e), "entry %d is the history's fault %d", i, i+1)
	}
	return sched, drawn
}

func entryStart(e nemesis.Entry) faultStart {
	return faultStart{e.Nemesis, string(e.Target), e.Point, e.Length, e.FaultID}
}

// replayChecks replays sched (with one more fault whose trigger cannot
// come) with o's workload and a longer time limit, and checks that the
// replay injected sched's faults, rules, points and lengths in its order,
// each for its length, and recorded the extra fault as not fired. It
// returns the replay's history and schedule.json.
func replayChecks(t *testing.T, o Options, sched nemesis.Schedule) (*history.History, nemesis.Schedule) {
	t.Helper()
	want := make([]faultStart, len(sched.Faults))
	for i, e := range sched.Faults {
		want[i] = entryStart(e)
	}
	never := sched.Faults[len(sched.Faults)-1]
	never.Trigger, never.Fired, never.FaultID = nemesis.Trigger{AfterGrant: 1_000_000_000}, false, 0
	sched.Faults = append(sched.Faults, never)
	path := filepath.Join(t.TempDir(), "schedule.json")
	require.NoError(t, sched.Write(path))

	o.Schedule, o.Nemesis = path, ""
	// Room for every trigger: the grants of the first run come at
	// another pace when the machine is loaded. A replay that ran out of
	// time before its last triggers came (beside two CPU hogs: 2 of 3
	// faults in 12 s) is run again twice as long, which must inject them
	// all.
	o.TimeLimit = o.TimeLimit * 2
	var second *harness.Outcome
	var h *history.History
	var replayed []faultStart
	for attempt := 1; ; attempt++ {
		var err error
		second, err = Run(context.Background(), o)
		require.NoError(t, err)
		h, replayed = faultStarts(t, second.Dir)
		if attempt == 2 || len(replayed) >= len(want) {
			break
		}
		t.Logf("the replay injected %d of %d faults in %s (its last triggers did not come in time): again for %s", len(replayed), len(want), o.TimeLimit, 2*o.TimeLimit)
		o.TimeLimit *= 2
	}
	require.Equal(t, path, h.Info.ReplayedFrom, "the history says where its faults came from")
	out, err := nemesis.LoadSchedule(filepath.Join(second.Dir, nemesis.ScheduleFile))
	require.NoError(t, err)
	require.Equal(t, path, out.ReplayedFrom)
	require.Len(t, out.Faults, len(sched.Faults), "no entry dropped")
	last := out.Faults[len(out.Faults)-1]
	require.False(t, last.Fired, "a trigger that never came is recorded as not fired")
	require.Zero(t, last.FaultID)

	require.Len(t, replayed, len(want), "the replay injects as many faults: want %v, replayed %v", strs(want), strs(replayed))
	sameOrder(t, out, want, replayed)
	lastedTheirLength(t, h, out)
	return h, out
}

// What a shrinker does: the schedule without its first fault and with
// every length halved replays what remains, at those lengths.
func TestReplayEditedSchedule(t *testing.T) {
	t.Parallel()
	needServer(t)
	o := baseOptions(t, "redis-lua", "pause,kill", 1870)
	o.TimeLimit = 6e9
	slot(t, 3*o.TimeLimit) // the run, then a replay twice as long
	sched, _ := drawnSchedule(t, o)
	if len(sched.Faults) < 2 {
		t.Skipf("the run injected %d fault: nothing to delete", len(sched.Faults))
	}
	sched.Faults = sched.Faults[1:]
	for i := range sched.Faults {
		d, err := time.ParseDuration(sched.Faults[i].Length)
		require.NoError(t, err)
		sched.Faults[i].Length = (d / 2).String()
	}
	replayChecks(t, o, sched)
}

// sameOrder checks that the replayed faults are the drawn ones, in the
// same order: each names its schedule entry (fault_id), which is the drawn
// fault of that place, fired once; the faults of one kind come in the
// schedule's order; two of different kinds come in the schedule's order
// unless the replay's grants put them the other way (both struck right
// after the same grant, or the first one past its trigger, as fired_at
// says, because a fault of its kind was still under way).
func sameOrder(t *testing.T, out nemesis.Schedule, drawn, replayed []faultStart) {
	t.Helper()
	entry := map[int64]int{}
	for i, e := range out.Faults[:len(drawn)] {
		require.True(t, e.Fired, "entry %d (%s, %s) fired", i, e.Nemesis, e.Trigger)
		entry[e.FaultID] = i
	}
	lastOf := map[string]int{}
	prev := -1
	for k, f := range replayed {
		i, ok := entry[f.ID]
		require.True(t, ok, "replayed fault %d (%s) names no entry", f.ID, f)
		require.Equal(t, drawn[i].String(), f.String(), "replayed fault %d is entry %d", k, i)
		if j, seen := lastOf[f.Fault]; seen {
			require.Greater(t, i, j, "%s faults in the schedule's order", f.Fault)
		}
		lastOf[f.Fault] = i
		if prev > i {
			a, b := opportunity(out.Faults[prev]), opportunity(out.Faults[i])
			require.True(t, a == 0 || b == 0 || a <= b, "entry %d struck before entry %d though its grant (%d) came after (%d)", prev, i, a, b)
		}
		prev = i
	}
}

// opportunity is the grant an entry struck after in the replay, 0 for a
// time trigger.
func opportunity(e nemesis.Entry) int64 {
	if e.FiredAt != nil {
		return e.FiredAt.AfterGrant
	}
	return e.Trigger.AfterGrant
}

// lastedTheirLength checks that each replayed fault that took effect and
// could run its course before the time limit lasted at least its entry's
// length (the time between its recorded start and end, not what its
// record says).
func lastedTheirLength(t *testing.T, h *history.History, out nemesis.Schedule) {
	t.Helper()
	length := map[int64]time.Duration{}
	for _, e := range out.Faults {
		if e.Fired {
			d, err := time.ParseDuration(e.Length)
			require.NoError(t, err)
			length[e.FaultID] = d
		}
	}
	// A strike aimed at an acquire in flight stands down once that acquire
	// lost to another client's ("healed early: ..."): it is not meant to
	// last its length.
	early := map[int64]bool{}
	for _, e := range h.Events {
		if e.Type == history.FaultEnd && strings.HasPrefix(e.Detail, "healed early") {
			early[e.FaultID] = true
		}
	}
	for _, f := range h.Faults {
		// (Cut short by the end of the run, "run ending": not to be
		// measured. A clock-client's length is how far back the clock
		// goes; it ends at the holder's next acquire.)
		if f.Name == "clock-client" || f.Failed || early[f.ID] || f.End == history.Never || time.Duration(f.Start)+length[f.ID] >= time.Duration(h.Info.TimeLimitMs)*time.Millisecond {
			continue
		}
		lasted := time.Duration(f.End - f.Start)
		require.GreaterOrEqual(t, lasted, length[f.ID]-10*time.Millisecond, "fault %d (%s) lasted its length", f.ID, f.Name)
	}
}

func strs(fs []faultStart) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

func TestReplayLocal(t *testing.T) {
	t.Parallel()
	needServer(t)
	cases := []struct {
		name, lock, nemesis string
		params              map[string]string
		need                func(*testing.T)
		mod                 func(*Options)
	}{
		{name: "pause and kill", lock: "redis-lua", nemesis: "pause,kill"},
		{name: "crash at a gap", lock: "redis-setnx-expire", nemesis: "crash-client", params: map[string]string{"crash-at": "after-setnx,after-grant"}},
		{name: "clock on redlock's granters", lock: "redlock", nemesis: "clock,pause", need: needFaketime},
		{name: "freeze redlock's granters", lock: "redlock", nemesis: "pause-server"},
		{name: "partition shapes", lock: "redis-lua", nemesis: "partition", need: needNet,
			params: map[string]string{"partition": "isolate-holder,split,lost-reply"}},
		{name: "failover on sentinel", lock: "redis-sentinel", nemesis: "failover", need: needSentinel, mod: failoverShape},
		{name: "kill the etcd leader", lock: "etcd", nemesis: "kill,pause", params: map[string]string{"kill": "leader"},
			need: func(t *testing.T) { needTopology(t, "etcd3") }},
		{name: "skew the holder's clock", lock: "redlock", nemesis: "clock-client"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.need != nil {
				tc.need(t)
			}
			t.Parallel()
			o := baseOptions(t, tc.lock, tc.nemesis, int64(1800+i))
			o.TimeLimit, o.Params = 6e9, tc.params
			if tc.mod != nil {
				tc.mod(&o)
			}
			if tc.nemesis == "failover" {
				quietSlot(t, 3*o.TimeLimit)
			} else {
				slot(t, 3*o.TimeLimit)
			}
			replayCompares(t, o)
		})
	}
}

// A network-speed fault replays like the others: a delay on redis-lua's
// links (an acquire in flight, the holder) is recorded with its rule,
// length and toxic, and each replayed strike puts that toxic on: the same
// delay, for the same length, holding the answers back as long.
func TestReplayNetSpeed(t *testing.T) {
	t.Parallel()
	needServer(t)
	needNet(t)
	for i, aims := range []string{"", nemesis.AimInFlight} {
		t.Run("aims "+aims, func(t *testing.T) {
			t.Parallel()
			o := baseOptions(t, "redis-lua", "delay", int64(1890+i))
			o.OpTimeout, o.Clients, o.TimeLimit = 3*time.Second, 3, 8e9
			rules := []nemesis.Rule{nemesis.RuleAcquirer, nemesis.RuleHolder}
			if aims != "" {
				o.Params, rules = map[string]string{"delay-at": aims}, rules[:1]
			}
			slot(t, 3*o.TimeLimit)
			replayNetSpeed(t, o, rules)
		})
	}
}

// replayNetSpeed runs o (a network-speed fault), whose strikes are aimed
// by rules, replays its schedule and checks that each replayed strike put
// its entry's toxic on.
func replayNetSpeed(t *testing.T, o Options, rules []nemesis.Rule) {
	t.Helper()
	sched, _ := drawnSchedule(t, o)
	for i, e := range sched.Faults {
		require.Contains(t, rules, e.Target, "entry %d", i)
		require.NotEmpty(t, e.Params["latency"], "entry %d records its delay", i)
		require.NotEmpty(t, e.Params["direction"], "entry %d records its direction", i)
	}
	h, out := replayChecks(t, o, sched)
	starts := map[int64]history.Event{}
	for _, e := range h.Events {
		if e.Type == history.FaultStart {
			starts[e.FaultID] = e
		}
	}
	for i, e := range out.Faults {
		if !e.Fired {
			continue
		}
		got := starts[e.FaultID]
		require.Contains(t, got.Detail, "delay "+e.Params["latency"], "entry %d's strike put its delay on", i)
		require.Contains(t, got.Detail, " for "+e.Length, "entry %d's strike lasts its length", i)
		latency, err := time.ParseDuration(e.Params["latency"])
		require.NoError(t, err)
		jitter, _ := time.ParseDuration(e.Params["jitter"])
		if e.Params["direction"] != "upstream" {
			require.Equal(t, int64(latency-jitter), got.Latency, "entry %d's strike holds each answer back as drawn", i)
		}
	}
}

func TestReplayDocker(t *testing.T) {
	t.Parallel()
	needDocker(t)
	o := baseOptions(t, "redis-lua", "pause,kill", 1850)
	o.Cluster, o.Images, o.TimeLimit = "docker", dockerImages("docker"), 6e9
	slot(t, 3*o.TimeLimit)
	replayCompares(t, o)
}

// A replay's faults are its schedule's: --nemesis may be left out, must
// name each of them when given, and a --param of a fault whose entries
// were all deleted sets nothing (it is still checked).
func TestValidateReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedule.json")
	sched := nemesis.Schedule{Version: 1, Seed: 3, Faults: []nemesis.Entry{
		{Nemesis: "kill", Trigger: nemesis.Trigger{AfterGrant: 2}, Target: nemesis.RuleAnyServer, Length: "500ms"},
	}}
	require.NoError(t, sched.Write(path))
	o := baseOptions(t, "redis-lua", "", 1)
	o.Machine, o.Schedule = &matrix.Machine{}, path
	o.Params = map[string]string{"pause-at": "after-grant"}
	p, err := o.Validate()
	require.NoError(t, err)
	require.Equal(t, []string{"kill"}, p.Names)
	require.NotNil(t, p.Replay)
	require.Equal(t, path, p.Replay.ReplayedFrom)

	o.Params = map[string]string{"pause": "zz"}
	_, err = o.Validate()
	require.ErrorContains(t, err, `--param pause: "zz"`)

	o.Params, o.Nemesis = nil, "pause"
	_, err = o.Validate()
	require.ErrorContains(t, err, "holds kill faults, which --nemesis pause does not name")
	var ue UsageError
	require.ErrorAs(t, err, &ue)

	o.Nemesis = "pause,kill"
	p, err = o.Validate()
	require.NoError(t, err)
	require.Equal(t, []string{"kill"}, p.Names, "only the schedule's faults are injected")

	sched.Faults = nil
	require.NoError(t, sched.Write(path))
	o.Nemesis = ""
	p, err = o.Validate()
	require.NoError(t, err)
	require.Equal(t, []string{"none"}, p.Names, "every fault deleted: a run without faults")
}

// A proxied run strikes nothing, but its links went through the proxies:
// its replay is a proxied run too (named so in its header and schedule,
// with the proxies in place), not a run without them.
func TestReplayProxied(t *testing.T) {
	t.Parallel()
	needServer(t)
	needNet(t)
	o := baseOptions(t, "redis-lua", nemesis.FaultProxied, 1895)
	o.TimeLimit = 3e9
	slot(t, 2*o.TimeLimit) // the run and its replay
	first, err := Run(context.Background(), o)
	require.NoError(t, err)
	path := filepath.Join(first.Dir, nemesis.ScheduleFile)

	o.Schedule, o.Nemesis = path, ""
	p, err := o.Validate()
	require.NoError(t, err)
	require.Equal(t, []string{nemesis.FaultProxied}, p.Names, "the replay names the run's nemesis")
	require.True(t, nemesis.NeedsProxies(p.Nemeses), "the replay puts the proxies in place")

	second, err := Run(context.Background(), o)
	require.NoError(t, err)
	h, err := history.Load(filepath.Join(second.Dir, "history.jsonl"))
	require.NoError(t, err)
	require.Equal(t, []string{nemesis.FaultProxied}, h.Info.Nemeses, "the replay's header")
	out, err := nemesis.LoadSchedule(filepath.Join(second.Dir, nemesis.ScheduleFile))
	require.NoError(t, err)
	require.Empty(t, out.Faults)
	require.Equal(t, []string{nemesis.FaultProxied}, out.Replayed(), "a replay of the replay is proxied too")
}
