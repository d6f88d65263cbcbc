package shrink

import (
	"fmt"
	"slices"
	"time"
)

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
	if err != nil || ok {
		return ok, err
	}
	// evaluate recorded the candidate (it returns no error otherwise).
	last := s.rep.Candidates[len(s.rep.Candidates)-1]
	if last.Outcome == Invalid {
		// Not "never failed again": it never ran.
		return false, fmt.Errorf("the original could not be run again: %s", last.Tries[0].Error)
	}
	s.rep.Stopped = StoppedNotReproduced
	s.rep.Rate = RateOf(last.Tries)
	return false, nil
}

// beforeViolation are the indices of the scheduled faults that fired and
// began no later than the original's first violation was complete (its
// end: a clock jump right after the first holder's grant begins after
// the anomaly does, and is what makes the second grant).
func (s *shrinker) beforeViolation() []int {
	start := map[int64]int64{}
	for _, f := range s.orig.Faults {
		start[f.ID] = f.Start
	}
	first, _ := s.prop.Match(s.orig.Result)
	var keep []int
	for i, f := range s.best.Schedule.Faults {
		t, known := start[f.ID()]
		if f.Fired() && (!known || t <= max(first.Start, first.End)) {
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
