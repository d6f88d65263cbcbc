package shrink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
)

// stubRunner decides from a candidate's configuration alone whether its
// run breaks the property, as a lock under one pause would: the pause
// with fault_id 3 (starting 3 s in) must be scheduled, last at least
// minLength, with at least two clients and a run long enough to reach
// the violation 1.1 s after it. Each run costs the fake clock the time it
// would take.
type stubRunner struct {
	t         *testing.T
	clock     *time.Time
	runs      int
	reproduce func(run int) bool // nil: every failing configuration fails
	cause     checker.Cause
	cancelAt  int // cancel at this run (1-based), 0 never
	cancel    context.CancelFunc
	noFault   bool // the violation needs no fault at all
	configs   []Config
	dir       string // every run's directory ("": runs/NAME)
}

const minLength = time.Second

func faultStart(id int64) int64 { return int64(time.Duration(id) * time.Second) }

func (r *stubRunner) Run(ctx context.Context, c Config, name string) (RunResult, error) {
	r.runs++
	r.configs = append(r.configs, c)
	if r.runs == r.cancelAt {
		r.cancel()
	}
	for k := range c.Params {
		// As the harness: a --param of a fault the run does not inject is
		// a usage error.
		if f, ok := nemesis.ParamFault(k); ok && !slices.Contains(c.Nemeses, f) {
			return RunResult{}, InvalidError{fmt.Errorf("--param %s sets the %s fault, which this run does not inject", k, f)}
		}
	}
	violation := faultStart(3) + int64(1100*time.Millisecond)
	var faults []history.Fault
	pauseOK := r.noFault
	if c.Schedule != nil {
		for _, f := range c.Schedule.Faults {
			if !slices.Contains(c.Nemeses, f.Nemesis()) {
				return RunResult{}, InvalidError{fmt.Errorf("fault %s not in --nemesis %s", f.Nemesis(), c.NemesisFlag())}
			}
			faults = append(faults, history.Fault{ID: f.ID(), Name: f.Nemesis(), Start: faultStart(f.ID()), End: faultStart(f.ID()) + 1})
			if d, _ := f.Length(); f.ID() == 3 && d >= minLength {
				pauseOK = true
			}
		}
	} else if slices.Contains(c.Nemeses, "pause") {
		pauseOK = true
		faults = append(faults, history.Fault{ID: 3, Name: "pause", Start: faultStart(3)})
	}
	fails := pauseOK && c.Clients >= 2 && int64(c.TimeLimit) > violation && (r.reproduce == nil || r.reproduce(r.runs))
	res := &checker.Result{Verdict: checker.Safe, FirstViolation: -1}
	took := c.TimeLimit
	if fails {
		cause := checker.CauseLeaseExpired
		if r.cause != "" {
			cause = r.cause
		}
		res.Verdict, res.FirstViolation = checker.Unsafe, violation
		res.Anomalies = []checker.Anomaly{
			{Kind: checker.KindLostUpdate, Severity: checker.SeverityViolation, Start: violation + 5},
			{Kind: checker.KindDoubleHolder, Severity: checker.SeverityViolation, Cause: cause, Start: violation, Explanation: "two holders"},
		}
		if c.StopEarly {
			took = time.Duration(violation) + 100*time.Millisecond
		}
	}
	res.Counts.DurationNs = int64(took)
	wall := took + time.Second
	// As the harness: a run whose context ends is cut there (the fake
	// clock stands for the time its deadline leaves), proves nothing
	// unless it broke the property by then, and says it was interrupted.
	if dl, ok := ctx.Deadline(); ok && wall > time.Until(dl) {
		wall = time.Until(dl)
		res.Interrupted = true
		if time.Duration(violation)+time.Second > wall {
			res.Verdict, res.Anomalies, res.FirstViolation = checker.Inconclusive, nil, -1
		}
	}
	*r.clock = r.clock.Add(wall)
	dir := "runs/" + name
	if r.dir != "" {
		dir = r.dir
	}
	return RunResult{Dir: dir, Result: res, Faults: faults}, nil
}

func original(t *testing.T, withSchedule bool) Original {
	t.Helper()
	c := Config{Nemeses: []string{"kill", "partition", "pause"}, Clients: 5, TimeLimit: 30 * time.Second, Params: map[string]string{"kill": "leader", "partition": "isolate-holder", "keep_datadir": "true"}}
	if withSchedule {
		s, err := LoadSchedule(filepath.Join("testdata", "schedule.json"))
		require.NoError(t, err)
		c.Schedule = s
	}
	res := &checker.Result{Verdict: checker.Unsafe, Anomalies: []checker.Anomaly{
		{Kind: checker.KindDoubleHolder, Severity: checker.SeverityViolation, Cause: checker.CauseLeaseExpired, Start: faultStart(3) + int64(1100*time.Millisecond), Explanation: "client 3 acquired the lock while client 5 still believed it held it"},
		{Kind: checker.KindLostUpdate, Severity: checker.SeverityViolation, Start: faultStart(6)},
	}}
	var faults []history.Fault
	for id := int64(1); id <= 4; id++ {
		faults = append(faults, history.Fault{ID: id, Start: faultStart(id)})
	}
	return Original{Dir: "store/run", Config: c, Result: res, Faults: faults, Seed: 7}
}

func newStub(t *testing.T) (*stubRunner, Options) {
	now := time.Unix(1000, 0)
	r := &stubRunner{t: t, clock: &now}
	return r, Options{Budget: 30 * time.Minute, Tries: 3, Confirm: 5, MinClients: 2, Now: func() time.Time { return *r.clock }}
}

// A run with five scheduled faults, five clients and 30 s shrinks to the
// one pause that breaks it, two clients, a run ending soon after the
// violation, the pause halved and no --param, and reproduces 5 of 5.
func TestShrinkWithSchedule(t *testing.T) {
	r, o := newStub(t)
	var saved []int
	o.Save = func(rep *Report) { saved = append(saved, len(rep.Candidates)) }
	rep, err := Shrink(context.Background(), r, original(t, true), o)
	require.NoError(t, err)
	require.Equal(t, StoppedDone, rep.Stopped)
	require.Equal(t, Property{Kind: checker.KindDoubleHolder, Cause: checker.CauseLeaseExpired}, rep.Property)
	require.Equal(t, int64(7), rep.Seed, "shrink.json says the seed every candidate ran with")
	m := rep.Minimal
	require.Len(t, m.Schedule.Faults, 1)
	require.Equal(t, int64(3), m.Schedule.Faults[0].ID())
	d, _ := m.Schedule.Faults[0].Length()
	require.Equal(t, 1500*time.Millisecond, d)
	require.Equal(t, []string{"pause"}, m.Nemeses)
	require.Equal(t, 2, m.Clients)
	require.True(t, m.StopEarly)
	require.Less(t, m.TimeLimit, 8*time.Second)
	require.Greater(t, m.TimeLimit, time.Duration(faultStart(3)+int64(1100*time.Millisecond)))
	require.Empty(t, m.Params)
	require.Equal(t, Rate{Tries: 5, Reproduced: 5, MedianAfterFaultNs: int64(1100 * time.Millisecond), MedianFirstViolationNs: faultStart(3) + int64(1100*time.Millisecond)}, rep.Rate)
	require.Equal(t, "5 of 5 tries, first violation 1.1 s after the fault (median)", rep.Rate.String())
	require.NotEmpty(t, rep.MinimalDir)

	// Every candidate is on record with its outcome, and the report was
	// saved after each one.
	steps := map[Step]int{}
	for i, c := range rep.Candidates {
		require.Equal(t, i+1, c.N)
		require.NotEmpty(t, c.Tries)
		require.Contains(t, []Outcome{Reproduced, NotReproduced, Invalid}, c.Outcome)
		require.Equal(t, c.Outcome == Reproduced && c.Step != StepConfirm, c.Kept)
		if c.Outcome == NotReproduced && c.Step != StepConfirm {
			require.Len(t, c.Tries, o.Tries, "a candidate counts as not reproducing after --tries runs")
		}
		steps[c.Step]++
	}
	for _, s := range []Step{StepBaseline, StepFaults, StepNemeses, StepClients, StepTimeLimit, StepLengths, StepParams, StepConfirm} {
		require.Positive(t, steps[s], "step %s", s)
	}
	require.True(t, slices.IsSorted(saved))
	require.Equal(t, r.runs, rep.Runs)
	// The baseline dropped the fault that never fired: no candidate ran it.
	for _, c := range r.configs {
		if c.Schedule != nil {
			for _, f := range c.Schedule.Faults {
				require.True(t, f.Fired())
			}
		}
	}
}

// Without a schedule the faults are drawn from the --nemesis names: the
// names shrink instead (ddmin), the rest as with one.
func TestShrinkWithoutSchedule(t *testing.T) {
	r, o := newStub(t)
	rep, err := Shrink(context.Background(), r, original(t, false), o)
	require.NoError(t, err)
	require.Equal(t, StoppedDone, rep.Stopped)
	require.Equal(t, []string{"pause"}, rep.Minimal.Nemeses)
	require.Equal(t, 2, rep.Minimal.Clients)
	require.Nil(t, rep.Minimal.Schedule)
	require.Empty(t, rep.Minimal.Params)
	// Dropping a fault drops its --param (the harness refuses a --param of
	// a fault it does not inject): no candidate was refused.
	dropped := false
	for _, c := range rep.Candidates {
		require.NotEqual(t, Invalid, c.Outcome, c.Change)
		if c.Kept && strings.Contains(c.Change, "(and their --param kill, partition)") {
			dropped = true
		}
	}
	require.True(t, dropped, "a kept candidate dropped kill and partition with their --params")
	require.Equal(t, 5, rep.Rate.Reproduced)
}

// A violation that needs no fault at all shrinks to --nemesis none.
func TestShrinkToNoFault(t *testing.T) {
	r, o := newStub(t)
	r.noFault = true
	rep, err := Shrink(context.Background(), r, original(t, true), o)
	require.NoError(t, err)
	require.Empty(t, rep.Minimal.Schedule.Faults)
	require.Empty(t, rep.Minimal.Nemeses)
	require.Equal(t, "none", rep.Minimal.NemesisFlag())
}

// A configuration that fails one run in three is still found (each
// candidate gets --tries runs), and the confirmation says how often.
func TestShrinkFlaky(t *testing.T) {
	r, o := newStub(t)
	r.reproduce = func(run int) bool { return run%3 == 0 }
	rep, err := Shrink(context.Background(), r, original(t, false), o)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Minimal.Clients)
	require.Equal(t, 5, rep.Rate.Tries)
	require.Less(t, rep.Rate.Reproduced, 5)
	require.Positive(t, rep.Rate.Reproduced)
}

// The same kind with another cause is not the same property.
func TestShrinkOtherCauseDoesNotReproduce(t *testing.T) {
	r, o := newStub(t)
	r.cause = checker.CauseLeaseBroken
	rep, err := Shrink(context.Background(), r, original(t, true), o)
	require.NoError(t, err)
	require.Equal(t, StoppedNotReproduced, rep.Stopped)
	require.Len(t, rep.Candidates, 1)
	require.Equal(t, NotReproduced, rep.Candidates[0].Outcome)
	require.ElementsMatch(t, []string{"double-holder (lease-broken)", "lost-update"}, rep.Candidates[0].Tries[0].Found)
	require.Equal(t, Rate{Tries: 3, MedianAfterFaultNs: -1, MedianFirstViolationNs: -1}, rep.Rate)
	require.Empty(t, rep.MinimalDir)
}

// When the budget runs out the best so far is kept, and the report says
// where it stopped.
func TestShrinkBudget(t *testing.T) {
	r, o := newStub(t)
	o.Budget = 90 * time.Second
	var progress strings.Builder
	o.Progress = &progress
	rep, err := Shrink(context.Background(), r, original(t, true), o)
	require.NoError(t, err)
	require.Equal(t, StoppedBudget, rep.Stopped)
	require.Contains(t, progress.String(), "\nshrink stopped (the budget ran out; the best by then) after ")
	require.NotEqual(t, StepBaseline, rep.StoppedAt)
	require.True(t, rep.Minimal.StopEarly, "the baseline reproduced and was kept")
	require.LessOrEqual(t, time.Duration(rep.ElapsedNs), o.Budget+40*time.Second, "no run starts after the budget")
	require.Positive(t, rep.Rate.Reproduced)
}

// Ctrl-C during a candidate ends the search with the best so far; the
// interrupted run proves nothing and no confirmation runs.
func TestShrinkInterrupted(t *testing.T) {
	r, o := newStub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.cancel, r.cancelAt = cancel, 4
	rep, err := Shrink(ctx, r, original(t, true), o)
	require.NoError(t, err)
	require.Equal(t, StoppedInterrupted, rep.Stopped)
	require.Equal(t, 4, r.runs, "no run after the interrupt")
	last := rep.Candidates[len(rep.Candidates)-1]
	require.Equal(t, Interrupted, last.Outcome)
	require.True(t, last.Tries[len(last.Tries)-1].Interrupted)
	require.True(t, rep.Finished)
}

// A rewritten schedule keeps every field it does not change, and is one
// the harness replays (the real loader, which refuses unknown keys).
func TestShrunkScheduleIsValid(t *testing.T) {
	s, err := LoadSchedule(filepath.Join("testdata", "schedule.json"))
	require.NoError(t, err)
	short := s.With([]int{2})
	short.Faults[0] = short.Faults[0].WithLength(750 * time.Millisecond)
	path := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, short.Write(path))
	back, err := LoadSchedule(path)
	require.NoError(t, err)
	require.Len(t, back.Faults, 1)
	d, ok := back.Faults[0].Length()
	require.True(t, ok)
	require.Equal(t, 750*time.Millisecond, d)
	loaded, err := nemesis.LoadSchedule(path)
	require.NoError(t, err)
	require.Equal(t, int64(42), loaded.Seed)
	require.Len(t, loaded.Faults, 1)
	require.Equal(t, nemesis.Entry{Nemesis: "pause", Trigger: nemesis.Trigger{AfterGrant: 9}, Target: nemesis.RuleHolder, Length: "750ms",
		Point: "after-grant", Params: map[string]string{}, Fired: true, FaultID: 3}, loaded.Faults[0])
	// The original is untouched.
	d, _ = s.Faults[2].Length()
	require.Equal(t, 3*time.Second, d)
}

// A schedule the harness would refuse (an unknown key, an unknown rule)
// is refused when it is loaded, not halfway through a shrink.
func TestLoadScheduleRefusesInvalid(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "schedule.json"))
	require.NoError(t, err)
	for name, bad := range map[string]string{
		"unknown key":  strings.Replace(string(b), `"seed": 42,`, `"seed": 42, "future_field": 1,`, 1),
		"unknown rule": strings.Replace(string(b), `"target": "granters"`, `"target": "servers-that-granted"`, 1),
	} {
		path := filepath.Join(t.TempDir(), "s.json")
		require.NoError(t, os.WriteFile(path, []byte(bad), 0o644))
		_, err := LoadSchedule(path)
		require.Error(t, err, name)
	}
}

// --property picks another violation of the original than its first.
func TestShrinkChosenProperty(t *testing.T) {
	r, o := newStub(t)
	o.Property = &Property{Kind: checker.KindLostUpdate}
	rep, err := Shrink(context.Background(), r, original(t, false), o)
	require.NoError(t, err)
	require.Equal(t, Property{Kind: checker.KindLostUpdate}, rep.Property)
	require.Equal(t, StoppedDone, rep.Stopped)
	require.Equal(t, 2, rep.Minimal.Clients)
	require.False(t, rep.Minimal.StopEarly, "--stop-early would end the runs at the double holder that comes first")
	require.Contains(t, rep.Candidates[0].Change, "without --stop-early")

	o.Property = &Property{Kind: checker.KindForeignRelease}
	_, err = Shrink(context.Background(), r, original(t, false), o)
	require.ErrorContains(t, err, "has no violation foreign-release to shrink (it has: [double-holder (lease-expired) lost-update])")
}

// Ctrl-C during the confirmation runs is an interrupted shrink (exit 130),
// not a finished one: the report says it stopped in the confirmation, and
// the interrupted run is on record, not counted in the rate.
func TestShrinkInterruptedInConfirmation(t *testing.T) {
	r, o := newStub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := Shrink(context.Background(), r, original(t, true), o)
	require.NoError(t, err)
	total := r.runs // the runs of a whole shrink, the last o.Confirm confirming

	r2, o2 := newStub(t)
	r2.cancel, r2.cancelAt = cancel, total-1 // the last confirmation run but one
	rep2, err := Shrink(ctx, r2, original(t, true), o2)
	require.NoError(t, err)
	require.Equal(t, rep.Minimal.Summary(), rep2.Minimal.Summary(), "the search itself was over")
	require.Equal(t, StoppedInterrupted, rep2.Stopped)
	require.Equal(t, StepConfirm, rep2.StoppedAt)
	require.Equal(t, total-1, r2.runs, "no run after the interrupt")
	last := rep2.Candidates[len(rep2.Candidates)-1]
	require.Equal(t, StepConfirm, last.Step)
	require.Len(t, last.Tries, o.Confirm-1, "the interrupted run is on record")
	require.True(t, last.Tries[len(last.Tries)-1].Interrupted)
	require.Equal(t, o.Confirm-2, rep2.Rate.Tries, "an interrupted run is not counted in the rate")
	// shrink.html counts the same way.
	rows := buildPage(t.TempDir(), rep2).Candidates
	require.Equal(t, "3 of 3 (+1 cut or failed)", rows[len(rows)-1].Tries)
}

// shrinkWithin shrinks the stub's original (with its schedule or not)
// within budget, and returns the report, the options and the progress
// printed.
func shrinkWithin(t *testing.T, budget time.Duration, withSchedule bool) (*Report, Options, *strings.Builder) {
	t.Helper()
	r, o := newStub(t)
	o.Budget = budget
	progress := &strings.Builder{}
	o.Progress = progress
	rep, err := Shrink(context.Background(), r, original(t, withSchedule), o)
	require.NoError(t, err)
	return rep, o, progress
}

// A candidate the budget leaves no time for is not announced: every
// candidate the terminal names is one shrink.json records, under the
// same number.
func TestShrinkBudgetAnnouncesOnlyCandidatesThatRun(t *testing.T) {
	for _, budget := range []time.Duration{20 * time.Second, 40 * time.Second, 90 * time.Second, 3 * time.Minute} {
		rep, _, progress := shrinkWithin(t, budget, true)
		announced := map[string]string{}
		for _, l := range strings.Split(progress.String(), "\n") {
			n, rest, ok := strings.Cut(l, "] ")
			if !ok || !strings.HasPrefix(n, "[") || strings.Contains(n, ".") || !strings.Contains(rest, ": ") {
				continue
			}
			step, _, _ := strings.Cut(rest, ":")
			if strings.Contains(step, " ") {
				continue // "[3] reproduced; best: ...", the candidate's outcome
			}
			require.NotContains(t, announced, n[1:], "budget %s: candidate %s announced twice:\n%s", budget, n, progress.String())
			announced[n[1:]] = step
		}
		require.Len(t, announced, len(rep.Candidates), "budget %s:\n%s", budget, progress.String())
		for _, c := range rep.Candidates {
			require.Equal(t, string(c.Step), announced[fmt.Sprint(c.N)])
		}
	}
}

// failingRunner is a harness that cannot run anything (a server binary
// gone, no free port): every run is an error.
type failingRunner struct{ runs int }

func (f *failingRunner) Run(context.Context, Config, string) (RunResult, error) {
	f.runs++
	return RunResult{Dir: fmt.Sprintf("runs/r%d", f.runs)}, errors.New("start redis cluster: redis-server: executable file not found in $PATH")
}

// A original whose every run is a harness error has not "never failed
// again": the shrink stops with the error (exit 2), not as a run that no
// longer reproduces (exit 3), and runs no confirmation.
func TestShrinkHarnessErrorIsNotNotReproduced(t *testing.T) {
	_, o := newStub(t)
	f := &failingRunner{}
	rep, err := Shrink(context.Background(), f, original(t, false), o)
	require.NoError(t, err)
	require.Equal(t, StoppedError, rep.Stopped)
	require.Equal(t, StepBaseline, rep.StoppedAt)
	require.Contains(t, rep.Error, "executable file not found")
	require.Equal(t, o.Tries, f.runs, "the baseline's tries, no confirmation")
	require.Len(t, rep.Candidates, 1)
	require.Equal(t, Invalid, rep.Candidates[0].Outcome)
	require.Empty(t, rep.MinimalDir)
	// shrink.html says why, and links no minimal run.
	out := t.TempDir()
	require.NoError(t, WriteOutputs(out, rep, harness.Options{Lock: "redis-lua"}))
	page, err := os.ReadFile(filepath.Join(out, PageFile))
	require.NoError(t, err)
	require.Contains(t, string(page), "the original could not be run again: start redis cluster: redis-server: executable file not found")
	require.NotContains(t, string(page), "its report")
	_, err = os.Lstat(filepath.Join(out, MinimalLink))
	require.True(t, os.IsNotExist(err))
}

// Ctrl-C before the first run: nothing ran, nothing to confirm, and the
// report says so.
func TestShrinkInterruptedBeforeAnyRun(t *testing.T) {
	r, o := newStub(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Shrink(ctx, r, original(t, false), o)
	require.NoError(t, err)
	require.Equal(t, StoppedInterrupted, rep.Stopped)
	require.Equal(t, StepBaseline, rep.StoppedAt)
	require.Zero(t, r.runs)
	require.Empty(t, rep.Candidates)
}

// A candidate's run ends where the confirmation's reserve begins: a long
// candidate (here --nemesis none, which runs its whole time limit) is cut
// there rather than eating the time of the confirmation runs, which all
// run.
func TestShrinkCandidateLeavesConfirmationItsReserve(t *testing.T) {
	for _, budget := range []time.Duration{45 * time.Second, 48 * time.Second, 51 * time.Second} {
		rep, o, progress := shrinkWithin(t, budget, false)
		require.Equal(t, StoppedBudget, rep.Stopped, "budget %s:\n%s", budget, progress.String())
		require.Equal(t, o.Confirm, rep.Rate.Tries, "budget %s: every confirmation run ran:\n%s", budget, progress.String())
		var cut bool
		for _, c := range rep.Candidates {
			cut = cut || c.Outcome == Cut
		}
		require.True(t, cut, "budget %s: the candidate that reached the reserve was cut:\n%s", budget, progress.String())
	}
}

// TestBaselineKeepsAFaultBegunWithinTheViolation: the --stop-early
// baseline keeps the faults begun before the first violation was complete,
// not only those before it began (a redlock run: the clock jumped 1.4 ms
// after the first holder's grant, within the double holder it caused, and
// a baseline without it never failed again).
func TestBaselineKeepsAFaultBegunWithinTheViolation(t *testing.T) {
	r, o := newStub(t)
	orig := original(t, true)
	a := &orig.Result.Anomalies[0]
	a.Start, a.End = faultStart(3)-int64(10*time.Millisecond), faultStart(3)+int64(20*time.Millisecond)
	rep, err := Shrink(context.Background(), r, orig, o)
	require.NoError(t, err)
	require.Equal(t, StoppedDone, rep.Stopped)
	require.Len(t, rep.Minimal.Schedule.Faults, 1)
	require.Equal(t, int64(3), rep.Minimal.Schedule.Faults[0].ID())
}

// TestRateWords: a fault begun within the anomaly's window is said as such,
// not "0.0 s after the fault".
func TestRateWords(t *testing.T) {
	require.Equal(t, "5 of 5 tries, first violation while the fault was on (median)", Rate{Tries: 5, Reproduced: 5}.String())
	require.Equal(t, "4 of 5 tries, first violation 1.1 s after the fault (median)", Rate{Tries: 5, Reproduced: 4, MedianAfterFaultNs: int64(1100 * time.Millisecond)}.String())
	require.Equal(t, "2 of 3 tries, first violation 2.0 s into the run (median), with no fault before it", Rate{Tries: 3, Reproduced: 2, MedianAfterFaultNs: -1, MedianFirstViolationNs: int64(2 * time.Second)}.String())
}
