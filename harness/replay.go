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
	names := sched.Names()
	if strings.TrimSpace(o.Nemesis) != "" {
		_, given, err := nemesis.Parse(o.Nemesis)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, n := range names {
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
// those it replayed, each saying whether it fired.
func (r *run) writeSchedule(env *nemesis.Env) error {
	return env.Schedule().Write(filepath.Join(r.dir, nemesis.ScheduleFile))
}
