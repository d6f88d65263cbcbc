package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/shrink"
)

const shrinkExitHelp = `Exit codes:
  0    done: shrink.json, repro.sh and shrink.html hold the smallest
       configuration found (when the budget ran out: the best by then)
  2    usage or harness error (a run that is not unsafe, a directory
       without a history, a budget that is not a duration; or the
       original could not be run again at all: shrink.json says
       "stopped": "error" and why)
  3    the original ran again but never failed the same way in --tries
       runs: nothing was shrunk (see shrink.json)
  130  interrupted (Ctrl-C), also during the confirmation runs: the best
       found so far is written, and nothing is left running`

// This build replays schedules: shrink's candidates run their schedule's
// faults (locktest run --schedule FILE), the faults named by the file.
func init() { shrink.Replay = replaySchedule }

// replaySchedule makes o replay the schedule in file instead of drawing
// faults from --nemesis names.
func replaySchedule(o *harness.Options, file string) { o.Schedule, o.Nemesis = file, "" }

// ShrinkOptions are the flags of `locktest shrink`.
type ShrinkOptions struct {
	Budget     time.Duration
	Tries      int
	Confirm    int
	MinClients int
	Out        string
	Property   string // KIND[:CAUSE]; "" the first violation's
}

func (o *ShrinkOptions) addFlags(c *cobra.Command) {
	fl := c.Flags()
	fl.DurationVar(&o.Budget, "budget", 10*time.Minute, "time for the whole search, the confirmation runs included")
	fl.IntVar(&o.Tries, "tries", 3, "runs of a candidate before it counts as not reproducing (thread timing is not seeded)")
	fl.IntVar(&o.Confirm, "confirm", 5, "runs of the result that measure its reproduction rate")
	fl.IntVar(&o.MinClients, "min-clients", 2, "fewest clients tried")
	fl.StringVar(&o.Property, "property", "", "the violation to keep, `KIND[:CAUSE]` (e.g. double-holder:lease-expired; default: the run's first violation)")
	fl.StringVar(&o.Out, "out", "", "shrink directory (default RUN_DIR/shrink, or shrink-2... when taken)")
}

// check refuses options out of range, naming each flag with prefix
// ("--" for locktest shrink, "--shrink-" for campaign --shrink).
func (o *ShrinkOptions) check(prefix string) error {
	switch {
	case o.Budget <= 0:
		return fmt.Errorf("%sbudget must be a positive duration (got %s)", prefix, o.Budget)
	case o.Tries < 1 || o.Tries > 20:
		return fmt.Errorf("%stries must be 1..20 (got %d)", prefix, o.Tries)
	case o.Confirm < 0 || o.Confirm > 50:
		return fmt.Errorf("%sconfirm must be 0..50 (got %d)", prefix, o.Confirm)
	case o.MinClients < 1:
		return fmt.Errorf("%smin-clients must be at least 1 (got %d)", prefix, o.MinClients)
	}
	return nil
}

func newShrinkCmd() *cobra.Command {
	o := &ShrinkOptions{}
	c := &cobra.Command{
		Use:   "shrink RUN_DIR",
		Short: "Find the smallest run that still fails like an unsafe run: fewest faults, clients, seconds",
		Long: `Shrink an unsafe run to the smallest configuration that still fails the same
property (the same anomaly kind, and the same cause where the checker names
one), re-running real servers with the run's own settings and seed:

  1. the run cut at its first violation (--stop-early);
  2. delta debugging (ddmin) over its faults (the scheduled faults of its
     schedule.json when this build replays schedules, else the --nemesis
     names): the fewest that still break it;
  3. fewer clients (down to --min-clients), a time limit ending soon after
     the violation, shorter faults, fewer --param settings, one at a time.

Each candidate runs up to --tries times (thread timing is not seeded) and
counts as reproducing at its first failure of the property; the result runs
--confirm more times for its reproduction rate. Runs of a local cluster
reuse its servers where the run's faults allow (as campaigns do).

The shrink directory holds shrink.json (every candidate with its runs and
outcome, the result, its rate, where the search stopped), repro.sh (one
locktest run line), minimal/ (a run of the result that reproduced, with its
report), shrink.html (the original next to the result, the anomaly's
operations and fault on a time line, the checker's words) and runs/ (every
candidate's runs). Ctrl-C keeps the best found so far and stops every
server, namespace and fault of the run under way.

` + shrinkExitHelp,
		Example: `  locktest shrink store/latest
  locktest shrink store/redis-lua/pause/20261126T083133.431 --budget 3m --tries 2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShrinkCmd(cmd, args[0], o)
		},
	}
	o.addFlags(c)
	return c
}

func runShrinkCmd(cmd *cobra.Command, dir string, o *ShrinkOptions) error {
	if err := o.check("--"); err != nil {
		return exitCode{exitError, err}
	}
	out := cmd.OutOrStdout()
	rep, outDir, err := shrinkRun(cmd.Context(), dir, o, out)
	var ue shrink.UsageError
	switch {
	case errors.As(err, &ue):
		return exitCode{exitError, ue}
	case err != nil:
		return exitCode{exitError, err}
	}
	fmt.Fprintf(out, "minimal: %s\nreproduce: %s\nreport: %s\n", rep.Minimal.Summary(), rep.Command, filepath.Join(outDir, shrink.PageFile))
	switch rep.Stopped {
	case shrink.StoppedInterrupted:
		fmt.Fprintf(cmd.ErrOrStderr(), "locktest: interrupted; the best found so far is in %s\n", outDir)
		return exitCode{code: exitInterrupted}
	case shrink.StoppedNotReproduced:
		return exitCode{exitInconclusive, fmt.Errorf("%s never failed with %s again in %d tries: nothing to shrink (see %s)", dir, rep.Property, rep.Rate.Tries, filepath.Join(outDir, shrink.ReportFile))}
	}
	if rep.Error != "" {
		return exitCode{exitError, errors.New(rep.Error)}
	}
	return nil
}

// shrinkRun shrinks the run in dir into its shrink directory (o.Out or a
// fresh one under dir), printing progress to out.
func shrinkRun(ctx context.Context, dir string, o *ShrinkOptions, out io.Writer) (*shrink.Report, string, error) {
	orig, base, note, err := shrink.LoadOriginal(dir)
	if err != nil {
		return nil, "", err
	}
	prop, _, _ := shrink.Target(orig.Result)
	var chosen *shrink.Property
	if o.Property != "" {
		p, err := shrink.ParseProperty(o.Property)
		if err != nil {
			return nil, "", shrink.UsageError{Err: fmt.Errorf("--property: %w", err)}
		}
		if _, ok := p.Match(orig.Result); !ok {
			return nil, "", shrink.UsageError{Err: fmt.Errorf("--property %s: %s has no such violation (it has: %s)", o.Property, dir, propertyFlags(shrink.Violations(orig.Result)))}
		}
		prop, chosen = p, &p
	}
	outDir, err := shrinkDir(dir, o.Out)
	if err != nil {
		return nil, "", err
	}
	base.ClientArgv = nil // this executable's worker, whatever ran the original
	pool := harness.NewPool(filepath.Join(outDir, shrink.ClustersDir))
	defer pool.Close()
	runner := &shrink.HarnessRunner{Base: base, Dir: outDir, Pool: pool}
	fmt.Fprintf(out, "shrinking %s: %s, %s; budget %s, %d tries per candidate\nshrink directory: %s\n", dir, prop, orig.Config.Summary(), o.Budget, o.Tries, outDir)
	if note != "" {
		fmt.Fprintf(out, "note: %s\n", note)
	}
	save := func(r *shrink.Report) { _ = r.Write(outDir) }
	rep, err := shrink.Shrink(ctx, runner, orig, shrink.Options{Budget: o.Budget, Tries: o.Tries, Confirm: o.Confirm,
		MinClients: o.MinClients, Property: chosen, Progress: out, Save: save})
	if err != nil {
		return nil, outDir, err
	}
	rep.Note = note
	if err := shrink.WriteOutputs(outDir, rep, base); err != nil {
		return rep, outDir, err
	}
	return rep, outDir, nil
}

// propertyFlags lists ps as --property takes them.
func propertyFlags(ps []shrink.Property) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Flag()
	}
	return strings.Join(out, ", ")
}

// shrinkDir makes the shrink directory: out when given (it must not hold
// a shrink already), else RUN_DIR/shrink, shrink-2... whichever is free.
func shrinkDir(runDir, out string) (string, error) {
	if out != "" {
		if _, err := os.Stat(filepath.Join(out, shrink.ReportFile)); err == nil {
			return "", shrink.UsageError{Err: fmt.Errorf("--out %s holds a shrink already: give another directory", out)}
		}
		return out, os.MkdirAll(out, 0o755)
	}
	for i := 1; i < 100; i++ {
		d := filepath.Join(runDir, "shrink")
		if i > 1 {
			d += fmt.Sprintf("-%d", i)
		}
		if err := os.Mkdir(d, 0o755); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: no free shrink directory", runDir)
}
