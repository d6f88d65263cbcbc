package harness

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/locktest/locktest/nemesis"
)

// faults parses the run's faults: --nemesis, or with --schedule the faults
// the schedule holds (replay), which --nemesis, when given, must name.
func (o *Options) faults() ([]nemesis.Nemesis, []string, *nemesis.Schedule, error) {
	if o.Schedule == "" {
		ns, names, err := nemesis.Parse(o.Nemesis)
		return ns, names, nil, err
	}
	sched, err := nemesis.LoadSchedule(o.Schedule)
	if err != nil {
		return nil, nil, nil, err
	}
	names := sched.Replayed()
	if strings.TrimSpace(o.Nemesis) != "" {
		givenNs, given, err := nemesis.Parse(o.Nemesis)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, n := range names {
			if n == nemesis.FaultProxied && !slices.Contains(given, n) {
				if nemesis.NeedsProxies(givenNs) {
					continue // the links of the network-speed faults given, without their strikes
				}
				return nil, nil, nil, fmt.Errorf("--schedule %s ran through the proxies (proxied), which --nemesis %s does not name", o.Schedule, o.Nemesis)
			}
			if !slices.Contains(given, n) {
				return nil, nil, nil, fmt.Errorf("--schedule %s holds %s faults, which --nemesis %s does not name", o.Schedule, n, o.Nemesis)
			}
		}
	}
	list := strings.Join(names, ",")
	if list == "" {
		list = "none" // every fault deleted: a run without faults
	}
	ns, names, err := nemesis.Parse(list)
	if err != nil {
		return nil, nil, nil, err
	}
	if sched.ReplayedFrom, err = filepath.Abs(o.Schedule); err != nil {
		return nil, nil, nil, err
	}
	return ns, names, &sched, nil
}

// writeSchedule writes the run's schedule.json: the faults env drew, or
// those it replayed, each saying whether it fired, and whether the run
// went through the proxies.
func (r *run) writeSchedule(env *nemesis.Env) error {
	s := env.Schedule()
	s.Proxied = nemesis.NeedsProxies(r.plan.Nemeses)
	return s.Write(filepath.Join(r.dir, nemesis.ScheduleFile))
}
