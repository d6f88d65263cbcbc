// Package shrink looks for the smallest configuration of an unsafe run
// that still breaks the same property, re-running real servers: the run
// cut at its first violation, then delta debugging over its faults, then
// fewer clients, a shorter run, shorter faults and fewer --param settings,
// one dimension at a time, each candidate tried up to --tries times
// (thread timing is not seeded), and at the end the reproduction rate of
// what it found. The logic here is pure; a Runner runs the candidates
// (HarnessRunner: the harness, in process).
package shrink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// RunResult is what one run of a candidate produced.
type RunResult struct {
	Dir    string
	Result *checker.Result
	Faults []history.Fault // the run's faults, from its history
}

// Runner runs a candidate configuration once on real servers. name
// labels the run ("c7-2": candidate 7, try 2). An error is a run that
// could not run (InvalidError: the harness refused the configuration); a
// run cut short by ctx returns its result with Interrupted set, or an
// error once ctx is done.
type Runner interface {
	Run(ctx context.Context, c Config, name string) (RunResult, error)
}

// InvalidError is a configuration the harness refuses (a usage error):
// trying it again cannot help.
type InvalidError struct{ Err error }

func (e InvalidError) Error() string { return e.Err.Error() }
func (e InvalidError) Unwrap() error { return e.Err }

// Original is the run being shrunk.
type Original struct {
	Dir    string
	Config Config
	Result *checker.Result
	Faults []history.Fault // its faults, from its history
}

// Options say how to shrink.
type Options struct {
	Budget  time.Duration // the whole search, confirmation included
	Tries   int           // runs of a candidate before it counts as not reproducing
	Confirm int           // runs of the result for its reproduction rate
	// Property is the property to shrink for; nil: that of the original's
	// first violation (Target).
	Property *Property
	// MinClients is the fewest clients tried (2: a double holder needs two).
	MinClients int
	// Progress receives a line per run and per candidate (nil: none).
	Progress io.Writer
	// Save is called with the report after every candidate (shrink.json).
	Save func(*Report)
	Now  func() time.Time // tests
}

var (
	errBudget      = errors.New("budget spent")
	errInterrupted = errors.New("interrupted")
)

// shrinker is one search: the best configuration so far and the record.
type shrinker struct {
	ctx      context.Context
	run      Runner
	o        Options
	orig     Original
	prop     Property
	start    time.Time
	deadline time.Time
	rep      *Report
	best     Config
	bestRuns []Try
	step     Step
}

// Shrink shrinks orig with r within o.Budget. It always returns a report:
// with the best configuration found when the budget runs out or ctx is
// done (Ctrl-C), and Stopped saying which. An error only says orig has
// nothing to shrink (no violation).
func Shrink(ctx context.Context, r Runner, orig Original, o Options) (*Report, error) {
	prop, first, ok := Target(orig.Result)
	if o.Property != nil {
		prop = *o.Property
		first, ok = prop.Match(orig.Result)
	}
	if !ok {
		return nil, fmt.Errorf("%s has no violation %s to shrink (it has: %v)", orig.Dir, prop, Violations(orig.Result))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Tries = max(o.Tries, 1)
	o.MinClients = max(o.MinClients, 1)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	orig.Config.describe()
	s := &shrinker{ctx: ctx, run: r, o: o, orig: orig, prop: prop, start: o.Now(), best: orig.Config.Clone()}
	s.deadline = s.start.Add(o.Budget)
	s.rep = &Report{Schema: Schema, Source: orig.Dir, Property: prop, Explanation: first.Explanation,
		Original: orig.Config, Minimal: s.best, Replay: orig.Config.Schedule != nil, BudgetNs: int64(o.Budget), Stopped: StoppedDone}
	err := s.search()
	s.finish(err)
	return s.rep, nil
}

// search runs the steps in order until one ends the search.
func (s *shrinker) search() error {
	s.step = StepBaseline
	ok, err := s.baseline()
	if err != nil || !ok {
		return err
	}
	steps := []struct {
		step Step
		do   func() error
	}{
		{StepTimeLimit, func() error { return s.timeLimit(3, 2, time.Second) }},
		{StepFaults, s.faults},
		{StepNemeses, s.nemeses},
		{StepClients, s.clients},
		{StepTimeLimit, func() error { return s.timeLimit(6, 5, 500*time.Millisecond) }},
		{StepLengths, s.lengths},
		{StepParams, s.params},
	}
	for _, st := range steps {
		s.step = st.step
		if err := st.do(); err != nil {
			return err
		}
	}
	return nil
}

// finish confirms the best configuration's rate and closes the report.
func (s *shrinker) finish(err error) {
	switch {
	case errors.Is(err, errInterrupted):
		s.rep.Stopped = StoppedInterrupted
	case errors.Is(err, errBudget):
		s.rep.Stopped = StoppedBudget
	case err != nil:
		s.rep.Stopped, s.rep.Error = StoppedDone, err.Error()
	}
	s.rep.StoppedAt = s.step
	if s.rep.Stopped != StoppedNotReproduced && s.rep.Stopped != StoppedInterrupted {
		s.confirm()
	}
	if s.rep.Rate.Tries == 0 {
		s.rep.Rate = RateOf(s.bestRuns)
	}
	for _, t := range s.bestRuns {
		if t.Reproduced && s.rep.MinimalDir == "" && s.rep.Stopped != StoppedNotReproduced {
			s.rep.MinimalDir = t.Dir
		}
	}
	s.rep.Minimal = s.best
	s.rep.ElapsedNs = int64(s.o.Now().Sub(s.start))
	s.rep.Finished = true
	s.save()
	fmt.Fprintf(s.o.Progress, "shrink %s after %d runs in %s: %s; reproduces %s\n", s.rep.Stopped, s.rep.Runs,
		time.Duration(s.rep.ElapsedNs).Round(time.Second), s.best.Summary(), s.rep.Rate)
}

// confirm runs the best configuration o.Confirm times (as many as the
// budget allows) for its reproduction rate.
func (s *shrinker) confirm() {
	if s.o.Confirm <= 0 {
		return
	}
	s.step = StepConfirm
	c := &Candidate{N: len(s.rep.Candidates) + 1, Step: StepConfirm, Change: fmt.Sprintf("%d runs of the result", s.o.Confirm), Config: s.best}
	fmt.Fprintf(s.o.Progress, "[%d] %s: %s (%s left)\n", c.N, c.Step, c.Change, s.left().Round(time.Second))
	for i := 0; i < s.o.Confirm; i++ {
		t, err := s.try(c, i+1, 0)
		if err != nil {
			break
		}
		c.Tries = append(c.Tries, t)
	}
	c.Outcome = NotReproduced
	rate := RateOf(c.Tries)
	if rate.Reproduced > 0 {
		c.Outcome = Reproduced
	}
	s.rep.Candidates = append(s.rep.Candidates, *c)
	if rate.Tries > 0 {
		s.rep.Rate = rate
	}
}

// left is the time left of the budget.
func (s *shrinker) left() time.Duration { return s.deadline.Sub(s.o.Now()) }

// reserve is the time kept for the confirmation runs: o.Confirm runs as
// long as the best configuration's runs took.
func (s *shrinker) reserve() time.Duration {
	var walls []int64
	for _, t := range s.bestRuns {
		walls = append(walls, t.WallNs)
	}
	if len(walls) == 0 {
		return 0
	}
	return time.Duration(s.o.Confirm) * time.Duration(median(walls))
}

func (s *shrinker) save() {
	s.rep.Minimal = s.best
	s.rep.ElapsedNs = int64(s.o.Now().Sub(s.start))
	if s.o.Save != nil {
		s.o.Save(s.rep)
	}
}

// try runs candidate c once (try number i); keep is the time of the
// budget it must leave (the confirmation's reserve).
func (s *shrinker) try(c *Candidate, i int, keep time.Duration) (Try, error) {
	if s.ctx.Err() != nil {
		return Try{}, errInterrupted
	}
	if s.left() <= keep {
		return Try{}, errBudget
	}
	// The budget's end cuts the run (in real time: left is on o.Now).
	ctx, cancel := context.WithTimeout(s.ctx, s.left())
	defer cancel()
	t0 := s.o.Now()
	res, err := s.run.Run(ctx, c.Config, fmt.Sprintf("c%d-%d", c.N, i))
	wall := s.o.Now().Sub(t0)
	s.rep.Runs++
	var t Try
	switch {
	case err != nil:
		t = Try{Dir: res.Dir, Error: err.Error(), WallNs: int64(wall), FirstViolationNs: -1, AfterFaultNs: -1}
	default:
		t = TryOf(s.prop, res.Dir, res.Result, res.Faults, wall)
	}
	switch {
	case s.ctx.Err() != nil:
		t.Interrupted = true
		return t, errInterrupted
	case ctx.Err() != nil && !t.Reproduced:
		t.Interrupted = true
		return t, errBudget
	}
	fmt.Fprintf(s.o.Progress, "  [%d.%d] %s in %s\n", c.N, i, tryWords(t), wall.Round(100*time.Millisecond))
	if err != nil {
		var inv InvalidError
		if errors.As(err, &inv) {
			return t, err
		}
	}
	return t, nil
}

func tryWords(t Try) string {
	switch {
	case t.Error != "":
		return "error: " + t.Error
	case t.Reproduced && t.AfterFaultNs >= 0:
		return fmt.Sprintf("reproduced at %.2fs, %.2fs after %s", time.Duration(t.FirstViolationNs).Seconds(), time.Duration(t.AfterFaultNs).Seconds(), t.Fault)
	case t.Reproduced:
		return fmt.Sprintf("reproduced at %.2fs", time.Duration(t.FirstViolationNs).Seconds())
	case len(t.Found) > 0:
		return fmt.Sprintf("%s, not the same property (%v)", t.Verdict, t.Found)
	}
	return string(t.Verdict)
}

// evaluate tries configuration cfg up to o.Tries times, until it
// reproduces; one that does becomes the best. An error ends the search
// (budget, interrupt); the candidate is recorded either way.
func (s *shrinker) evaluate(step Step, change string, cfg Config) (bool, error) {
	cfg.describe()
	c := &Candidate{N: len(s.rep.Candidates) + 1, Step: step, Change: change, Config: cfg, Outcome: NotReproduced}
	fmt.Fprintf(s.o.Progress, "[%d] %s: %s (%s left)\n", c.N, step, change, s.left().Round(time.Second))
	var err error
	for i := 1; i <= s.o.Tries; i++ {
		var t Try
		t, err = s.try(c, i, s.reserve())
		if t.WallNs > 0 || t.Dir != "" || t.Error != "" {
			c.Tries = append(c.Tries, t)
		}
		if t.Reproduced {
			c.Outcome = Reproduced
			break
		}
		if err != nil {
			c.Outcome = outcomeOf(err)
			break
		}
	}
	if len(c.Tries) == 0 && err != nil {
		return false, err // nothing ran: not a candidate
	}
	if c.Outcome == Reproduced {
		c.Kept = true
		s.best, s.bestRuns = cfg, c.Tries
		err = nil // a reproduction is kept even if the budget ended with it
		if errs := s.ctx.Err(); errs != nil {
			err = errInterrupted
		}
	}
	s.rep.Candidates = append(s.rep.Candidates, *c)
	fmt.Fprintf(s.o.Progress, "[%d] %s; best: %s\n", c.N, c.Outcome, s.best.Summary())
	s.save()
	if err != nil && c.Outcome == Invalid {
		err = nil // the harness refused this one: go on with the next
	}
	return c.Outcome == Reproduced, err
}

func outcomeOf(err error) Outcome {
	var inv InvalidError
	switch {
	case errors.Is(err, errInterrupted):
		return Interrupted
	case errors.Is(err, errBudget):
		return Cut
	case errors.As(err, &inv):
		return Invalid
	}
	return NotReproduced
}

// baseline reruns the original cut at its first violation: --stop-early
// (when the property is that of the run's first violation), and without
// the scheduled faults that came after it or never fired.
// When even that never breaks the property the search ends there.
func (s *shrinker) baseline() (bool, error) {
	c := s.best.Clone()
	change := "the original as recorded"
	// --stop-early ends a run at its first violation of any kind: it cuts
	// at the property only when that is the original's first.
	first, _, _ := Target(s.orig.Result)
	switch {
	case first != s.prop:
		c.StopEarly = false
		change = fmt.Sprintf("without --stop-early (%s is not the run's first violation: %s is)", s.prop, first)
	case !s.best.StopEarly:
		c.StopEarly = true
		change = "--stop-early: end at the first violation"
	}
	if c.Schedule != nil {
		keep := s.beforeViolation()
		if len(keep) < len(c.Schedule.Faults) {
			change += fmt.Sprintf("; %d of %d scheduled faults (the others came after the violation or never fired)", len(keep), len(c.Schedule.Faults))
			c.Schedule = c.Schedule.With(keep)
		}
	}
	ok, err := s.evaluate(StepBaseline, change, c)
	if err == nil && !ok {
		s.rep.Stopped = StoppedNotReproduced
		s.rep.Rate = RateOf(s.rep.Candidates[len(s.rep.Candidates)-1].Tries)
	}
	return ok, err
}

// beforeViolation are the indices of the scheduled faults that fired and
// began no later than the original's first violation.
func (s *shrinker) beforeViolation() []int {
	start := map[int64]int64{}
	for _, f := range s.orig.Faults {
		start[f.ID] = f.Start
	}
	first, _ := s.prop.Match(s.orig.Result)
	var keep []int
	for i, f := range s.best.Schedule.Faults {
		t, known := start[f.ID()]
		if f.Fired() && (!known || t <= first.Start) {
			keep = append(keep, i)
		}
	}
	return keep
}

// faults is ddmin over the scheduled faults, then the --nemesis names the
// remaining faults need.
func (s *shrinker) faults() error {
	if s.best.Schedule == nil || len(s.best.Schedule.Faults) == 0 {
		return nil
	}
	sched := s.best.Schedule
	_, err := DDMin(len(sched.Faults), func(keep []int) (bool, error) {
		c := s.best.Clone()
		c.Schedule = sched.With(keep)
		return s.evaluate(StepFaults, fmt.Sprintf("%d of %d faults: %v", len(keep), len(sched.Faults), describeAll(c.Schedule)), c)
	})
	if err != nil {
		return err
	}
	var used []string
	for _, f := range s.best.Schedule.Faults {
		used = appendOnce(used, f.Nemesis())
	}
	kept := slices.DeleteFunc(slices.Clone(s.best.Nemeses), func(n string) bool { return !slices.Contains(used, n) })
	if len(kept) < len(s.best.Nemeses) {
		c, change := s.best.withNemeses(kept)
		_, err = s.evaluate(StepNemeses, change+", the faults left", c)
	}
	return err
}

func describeAll(s *Schedule) []string {
	out := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		out[i] = f.Describe()
	}
	return out
}

// nemeses is ddmin over the --nemesis names, for a run shrunk without a
// schedule (its faults are drawn by the seed from the names).
func (s *shrinker) nemeses() error {
	if s.best.Schedule != nil || len(s.best.Nemeses) == 0 {
		return nil
	}
	names := slices.Clone(s.best.Nemeses)
	start := s.best
	_, err := DDMin(len(names), func(keep []int) (bool, error) {
		// From the configuration the step started with: a kept candidate
		// dropped the --param settings of the names it dropped.
		c, change := start.withNemeses(pick(names, keep))
		return s.evaluate(StepNemeses, change, c)
	})
	return err
}

func pick[T any](xs []T, keep []int) []T {
	out := make([]T, 0, len(keep))
	for _, i := range keep {
		out = append(out, xs[i])
	}
	return out
}

// clients looks for the fewest clients that still fail, from
// o.MinClients up: the smallest first, then halving the gap.
func (s *shrinker) clients() error {
	return lower(s.o.MinClients, func() int { return s.best.Clients }, func(n int) (bool, error) {
		c := s.best.Clone()
		c.Clients = n
		return s.evaluate(StepClients, fmt.Sprintf("clients %d -> %d", s.best.Clients, n), c)
	})
}

// lower is a search for the smallest value in [lo, cur()] that passes
// test, cur() known to pass: lo first (the likeliest big win), then
// bisection, assuming that a value passes when a smaller one does.
func lower(lo int, cur func() int, test func(int) (bool, error)) error {
	bad := lo - 1
	for cur()-bad > 1 {
		n := lo
		if bad >= lo {
			n = bad + (cur()-bad)/2
		}
		ok, err := test(n)
		if err != nil {
			return err
		}
		if !ok {
			bad = n
		}
	}
	return nil
}

// timeLimit ends the run soon after the violation: num/den of the latest
// first violation of the best's reproductions, plus slack, rounded up to
// round. One candidate, tried when it is shorter than the current limit.
func (s *shrinker) timeLimit(num, den int64, round time.Duration) error {
	var latest int64
	for _, t := range s.bestRuns {
		latest = max(latest, t.FirstViolationNs)
	}
	if latest <= 0 {
		return nil
	}
	tl := time.Duration(latest*num/den) + round
	tl = (tl + round - 1) / round * round
	if tl >= s.best.TimeLimit {
		return nil
	}
	c := s.best.Clone()
	c.TimeLimit = tl
	_, err := s.evaluate(StepTimeLimit, fmt.Sprintf("time limit %s -> %s (violation at %.2fs)", s.best.TimeLimit, tl, time.Duration(latest).Seconds()), c)
	return err
}

// lengths shortens each scheduled fault that has a length: to a half,
// else to three quarters.
func (s *shrinker) lengths() error {
	if s.best.Schedule == nil {
		return nil
	}
	for i := range s.best.Schedule.Faults {
		d, ok := s.best.Schedule.Faults[i].Length()
		if !ok {
			continue
		}
		for _, shorter := range []time.Duration{d / 2, d * 3 / 4} {
			c := s.best.Clone()
			c.Schedule.Faults[i] = c.Schedule.Faults[i].WithLength(shorter.Round(time.Millisecond))
			ok, err := s.evaluate(StepLengths, fmt.Sprintf("fault %d (%s) %s -> %s", i+1, c.Schedule.Faults[i].Nemesis(), d, shorter.Round(time.Millisecond)), c)
			if err != nil {
				return err
			}
			if ok {
				break
			}
		}
	}
	return nil
}

// params is ddmin over the --param settings.
func (s *shrinker) params() error {
	if len(s.best.Params) == 0 {
		return nil
	}
	keys := make([]string, 0, len(s.best.Params))
	for k := range s.best.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	all := s.best.Params
	_, err := DDMin(len(keys), func(keep []int) (bool, error) {
		c := s.best.Clone()
		c.Params = map[string]string{}
		for _, k := range pick(keys, keep) {
			c.Params[k] = all[k]
		}
		return s.evaluate(StepParams, fmt.Sprintf("--param: %d of %d (%v)", len(keep), len(keys), pick(keys, keep)), c)
	})
	return err
}
