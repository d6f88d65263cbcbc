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
	// Seed is its --seed: every candidate runs with it (only thread
	// timing differs from run to run).
	Seed int64
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
	s.rep = &Report{Schema: Schema, Source: orig.Dir, Seed: orig.Seed, Property: prop, Explanation: first.Explanation,
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
		s.rep.Stopped, s.rep.Error = StoppedError, err.Error()
	}
	s.rep.StoppedAt = s.step
	if s.rep.Stopped == StoppedDone || s.rep.Stopped == StoppedBudget {
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
	fmt.Fprintf(s.o.Progress, "shrink %s after %d runs in %s: %s; reproduces %s\n", stoppedTerm[s.rep.Stopped], s.rep.Runs,
		time.Duration(s.rep.ElapsedNs).Round(time.Second), s.best.Summary(), s.rep.Rate)
}

// stoppedTerm says why shrinking stopped on the terminal's last line.
var stoppedTerm = map[string]string{
	StoppedDone:          "done",
	StoppedBudget:        "stopped (the budget ran out; the best by then)",
	StoppedInterrupted:   "interrupted (the best by then)",
	StoppedNotReproduced: "stopped (the original never failed the same way again; nothing shrunk)",
	StoppedError:         "stopped (the original could not be run again; nothing shrunk)",
}

// confirm runs the best configuration o.Confirm times (as many as the
// budget allows) for its reproduction rate.
func (s *shrinker) confirm() {
	if s.o.Confirm <= 0 {
		return
	}
	s.step = StepConfirm
	if err := s.canStart(0); err != nil {
		if errors.Is(err, errInterrupted) {
			s.rep.Stopped, s.rep.StoppedAt = StoppedInterrupted, StepConfirm
		}
		return // no time left for a single run: no confirmation to record
	}
	c := &Candidate{N: len(s.rep.Candidates) + 1, Step: StepConfirm, Change: fmt.Sprintf("%d runs of the result", s.o.Confirm), Config: s.best}
	fmt.Fprintf(s.o.Progress, "[%d] %s: %s (%s left)\n", c.N, c.Step, c.Change, s.left().Round(time.Second))
	var err error
	for i := 0; i < s.o.Confirm && err == nil; i++ {
		var t Try
		t, err = s.try(c, i+1, 0)
		if t.WallNs > 0 || t.Dir != "" || t.Error != "" {
			c.Tries = append(c.Tries, t)
		}
	}
	c.Outcome = NotReproduced
	rate := RateOf(c.Tries)
	if rate.Reproduced > 0 {
		c.Outcome = Reproduced
	}
	// Ctrl-C during the confirmation ends the shrink as interrupted (exit
	// 130), like Ctrl-C anywhere else: its rate counts the runs that ended.
	if errors.Is(err, errInterrupted) {
		s.rep.Stopped, s.rep.StoppedAt = StoppedInterrupted, StepConfirm
	}
	s.rep.Candidates = append(s.rep.Candidates, *c)
	if rate.Tries > 0 {
		s.rep.Rate = rate
	}
}

// left is the time left of the budget.
func (s *shrinker) left() time.Duration { return s.deadline.Sub(s.o.Now()) }

// reserve is the time kept for the confirmation runs: o.Confirm runs as
// long as the best configuration's runs took, and a quarter more (runs of
// one configuration vary: 3.4-3.9 s around a median of 3.6 s measured).
func (s *shrinker) reserve() time.Duration {
	var walls []int64
	for _, t := range s.bestRuns {
		walls = append(walls, t.WallNs)
	}
	if len(walls) == 0 {
		return 0
	}
	return time.Duration(s.o.Confirm) * time.Duration(median(walls)) * 5 / 4
}

func (s *shrinker) save() {
	s.rep.Minimal = s.best
	s.rep.ElapsedNs = int64(s.o.Now().Sub(s.start))
	if s.o.Save != nil {
		s.o.Save(s.rep)
	}
}

// canStart says whether a run may start, leaving keep of the budget:
// errInterrupted after Ctrl-C, errBudget when the time left is not more
// than keep.
func (s *shrinker) canStart(keep time.Duration) error {
	if s.ctx.Err() != nil {
		return errInterrupted
	}
	if s.left() <= keep {
		return errBudget
	}
	return nil
}

// try runs candidate c once (try number i); keep is the time of the
// budget it must leave (the confirmation's reserve).
func (s *shrinker) try(c *Candidate, i int, keep time.Duration) (Try, error) {
	if err := s.canStart(keep); err != nil {
		return Try{}, err
	}
	// The budget's end cuts the run (in real time: left is on o.Now), and
	// so does the time kept for the confirmation runs: a long candidate
	// must not eat it.
	ctx, cancel := context.WithTimeout(s.ctx, s.left()-keep)
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
	case (ctx.Err() != nil || t.Interrupted) && !t.Reproduced:
		// Cut by the deadline (a run interrupted without Ctrl-C was).
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
	// A candidate that cannot start is neither announced nor recorded.
	if err := s.canStart(s.reserve()); err != nil {
		return false, err
	}
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
	if c.Outcome == NotReproduced && allFailed(c.Tries) {
		c.Outcome = Invalid // no run proved anything either way
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

// allFailed: every one of tries (at least one) is a run the harness
// could not make.
func allFailed(tries []Try) bool {
	for _, t := range tries {
		if t.Error == "" {
			return false
		}
	}
	return len(tries) > 0
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
