package shrink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
)

// UsageError is a run directory shrink cannot take: exit 2, one line.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

func usage(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// Replay makes o replay the schedule in file (`locktest run --schedule
// FILE`); nil while this build cannot replay a schedule: the faults of
// every candidate are then drawn by the seed from its --nemesis names.
var Replay func(o *harness.Options, file string)

// LoadOriginal reads a run directory to shrink: its options
// (config.json), its result (results.json, which must be unsafe), its
// faults (history.jsonl) and its schedule.json when it has one that this
// build can replay (note says when it has one that it cannot).
func LoadOriginal(dir string) (orig Original, base harness.Options, note string, err error) {
	if _, err := os.Stat(filepath.Join(dir, "history.jsonl")); err != nil {
		return orig, base, "", usage("%s is not a run directory: no history.jsonl", dir)
	}
	var res checker.Result
	if err := readJSON(filepath.Join(dir, "results.json"), &res); err != nil {
		return orig, base, "", usage("%s has no readable results.json (check it first: locktest check %s): %v", dir, dir, err)
	}
	if res.Verdict != checker.Unsafe {
		return orig, base, "", usage("%s is %s, not unsafe: shrink looks for the smallest run that still fails", dir, res.Verdict)
	}
	if _, _, ok := Target(&res); !ok {
		return orig, base, "", usage("%s is unsafe but names no violation to shrink", dir)
	}
	var cfg struct {
		Options *harness.Options `json:"options"`
	}
	if err := readJSON(filepath.Join(dir, "config.json"), &cfg); err != nil || cfg.Options == nil {
		return orig, base, "", usage("%s has no readable config.json (the run's settings, needed to run it again): %v", dir, err)
	}
	h, err := history.Load(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return orig, base, "", fmt.Errorf("%s: %w", dir, err)
	}
	base = *cfg.Options
	orig = Original{Dir: dir, Config: ConfigOf(base), Result: &res, Faults: h.Faults, Seed: base.Seed}
	sched := filepath.Join(dir, ScheduleFile)
	if _, err := os.Stat(sched); err == nil {
		if Replay == nil {
			note = "the run has a schedule.json, but this build cannot replay one: faults are drawn by the seed from the --nemesis names"
		} else if orig.Config.Schedule, err = LoadSchedule(sched); err != nil {
			return orig, base, "", usage("%v", err)
		}
	}
	return orig, base, note, nil
}

// readJSON reads the JSON file path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// HarnessRunner runs candidates with harness.Run in this process, on real
// servers: the original's options with the candidate's settings, its runs
// stored under Dir/runs, its schedule (if any) written to Dir/schedules,
// and the clusters of a Pool reused from run to run where the harness's
// pool allows (local backend, no failover).
type HarnessRunner struct {
	Base harness.Options
	Dir  string
	Pool *harness.Pool
	// Log receives the runs' own output (io.Discard if nil).
	Log io.Writer
}

// Run runs c once.
func (h *HarnessRunner) Run(ctx context.Context, c Config, name string) (RunResult, error) {
	o := c.Apply(h.Base)
	o.Store = filepath.Join(h.Dir, RunsDir)
	o.Pool, o.Quiet, o.Out = h.Pool, true, h.Log
	if o.Out == nil {
		o.Out = io.Discard
	}
	if c.Schedule != nil {
		if Replay == nil {
			return RunResult{}, InvalidError{errors.New("this build cannot replay a schedule (locktest run --schedule)")}
		}
		file, err := filepath.Abs(filepath.Join(h.Dir, SchedulesDir, name+".json"))
		if err != nil {
			return RunResult{}, err
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return RunResult{}, err
		}
		if err := c.Schedule.Write(file); err != nil {
			return RunResult{}, err
		}
		Replay(&o, file)
	}
	o.Command = ShellLine(CommandLine(o, ""))
	out, err := harness.Run(ctx, o)
	var ue harness.UsageError
	switch {
	case errors.As(err, &ue):
		return RunResult{}, InvalidError{ue}
	case err != nil:
		var dir string
		if out != nil {
			dir = out.Dir
		}
		return RunResult{Dir: dir}, err
	}
	res := out.Result
	res.Interrupted = res.Interrupted || out.Interrupted
	h2, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
	if err != nil {
		return RunResult{Dir: out.Dir}, err
	}
	return RunResult{Dir: out.Dir, Result: &res, Faults: h2.Faults}, nil
}
