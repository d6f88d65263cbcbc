package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workloads"
)

type runFlags struct {
	o           harness.Options
	hold, think string
	seedSet     bool
	nemesisSet  bool
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	c := &cobra.Command{
		Use:   "run --lock NAME --nemesis LIST",
		Short: "Run one lock scheme under faults and check the history",
		Long: `Run one lock scheme under faults and check the history.

The run starts its own servers (never a server the machine already runs),
drives --clients client processes, injects the faults named by --nemesis,
writes everything to a new run directory under --store (store/latest points
to it) and prints the verdict.

` + exitCodesHelp,
		Example: `  locktest run --lock redis-lua --nemesis pause
  locktest run --lock redis-lua --nemesis pause --fence --seed 42
  locktest run --lock redis-setnx --nemesis crash-client --time-limit 20s
  locktest run --client-cmd "python3 examples/redis-py/client.py" --topology redis --nemesis pause`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.seedSet = cmd.Flags().Changed("seed")
			f.nemesisSet = cmd.Flags().Changed("nemesis")
			f.o.SizeForFaults = !cmd.Flags().Changed("ttl") && !cmd.Flags().Changed("hold")
			return runRun(cmd, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.o.Lock, "lock", "", "lock `NAME` (see locktest list)")
	fl.StringVar(&f.o.Nemesis, "nemesis", "none", "faults, comma separated `LIST` (see locktest list)")
	fl.DurationVar(&f.o.TimeLimit, "time-limit", 30*time.Second, "how long the workload runs")
	fl.IntVar(&f.o.Clients, "clients", 5, "number of client processes")
	fl.DurationVar(&f.o.TTL, "ttl", 2*time.Second, "lease TTL for schemes that expire; pauses are sized from it")
	fl.StringVar(&f.hold, "hold", "100ms..500ms", "time a holder spends in its critical section, MIN..MAX")
	fl.StringVar(&f.think, "think", "10ms..50ms", "pause between a client's attempts, MIN..MAX")
	fl.Int64Var(&f.o.Seed, "seed", 0, "seed for every random choice (default: derived from the time, and printed)")
	fl.BoolVar(&f.o.Fence, "fence", false, "hand out fencing tokens and make the guarded resource reject stale ones")
	fl.BoolVar(&f.o.Wait, "wait", false, "blocking acquire: retry every 100ms (jittered) until --wait-timeout")
	fl.DurationVar(&f.o.WaitTimeout, "wait-timeout", 5*time.Second, "how long a blocking acquire waits")
	fl.DurationVar(&f.o.OpTimeout, "op-timeout", time.Second, "deadline of one request from a client to a server")
	fl.StringVar(&f.o.Store, "store", "store", "directory that keeps every run")
	fl.StringVar(&f.o.Cluster, "cluster", string(clusters.Local), "where the servers run: local (processes), docker (containers the run creates), compose (a stack started from docker-compose.yml)")
	fl.Var(paramsFlag{m: &f.o.Images, name: "image"}, "image", "with --cluster docker: image per server kind, `KIND=IMAGE`, KIND one of redis, zookeeper, etcd, mariadb (default the official image, or $LOCKTEST_IMAGE_<KIND>)")
	fl.StringVar(&f.o.Topology, "topology", "", "servers to run the scheme on, when it runs on more than its own (see locktest list), e.g. mysql-replicated")
	fl.BoolVar(&f.o.Quiet, "quiet", false, "print only the verdict lines and where the report is: no progress, counts, properties or anomalies, no colours")
	fl.BoolVar(&f.o.StopEarly, "stop-early", false, "end the workload as soon as the online checker is certain of a violation (campaigns always do)")
	fl.Var(paramsFlag{m: &f.o.Params}, "param", "scheme or server setting `KEY=VALUE` (repeatable, each key once; see locktest list)")
	fl.StringVar(&f.o.ClientCmd, "client-cmd", "", "run this shell command as every client process: your own lock client speaking docs/protocol.md (needs --topology)")
	fl.StringVar(&f.o.Topology, "cluster-topology", "", "same as --topology")
	fl.StringVar(&f.o.Schedule, "schedule", "", "replay the faults of this `FILE` (a run's schedule.json) instead of drawing them, with the workload settings given here (--seed defaults to the file's)")
	return c
}

func runRun(cmd *cobra.Command, f *runFlags) error {
	var err error
	if f.o.Lock == "" && f.o.ClientCmd == "" {
		return exitCode{exitError, fmt.Errorf("--lock NAME or --client-cmd CMD is required (see locktest list)")}
	}
	if f.o.Hold, err = parseRange(f.hold); err != nil {
		return exitCode{exitError, fmt.Errorf("--hold: %w", err)}
	}
	if f.o.Think, err = parseRange(f.think); err != nil {
		return exitCode{exitError, fmt.Errorf("--think: %w", err)}
	}
	if err := scheduleDefaults(f); err != nil {
		return exitCode{exitError, err}
	}
	if !f.seedSet {
		f.o.Seed = time.Now().UnixNano() % 1_000_000_007
	}
	f.o.Command = strings.Join(os.Args, " ")
	f.o.Out = cmd.OutOrStdout()
	out, err := harness.Run(cmd.Context(), f.o)
	var ue harness.UsageError
	switch {
	case errors.As(err, &ue):
		return exitCode{exitError, ue}
	case err != nil && cmd.Context().Err() != nil:
		return exitCode{exitInterrupted, fmt.Errorf("interrupted: %w", err)}
	case err != nil:
		return exitCode{exitError, err}
	case out.Interrupted:
		fmt.Fprintf(cmd.ErrOrStderr(), "locktest: interrupted; history kept in %s (check it again with `locktest check %s`)\n", out.Dir, out.Dir)
		return exitCode{code: exitInterrupted}
	}
	return exitCode{code: verdictCode(out.Result.Verdict)}
}

// scheduleDefaults, for a replay (--schedule), takes the faults from the
// file unless --nemesis names them, and the seed from it unless --seed is
// given: the replay runs the workload the schedule was recorded with.
func scheduleDefaults(f *runFlags) error {
	if f.o.Schedule == "" {
		return nil
	}
	if !f.nemesisSet {
		f.o.Nemesis = ""
	}
	s, err := nemesis.LoadSchedule(f.o.Schedule)
	if err != nil {
		return err
	}
	if !f.seedSet {
		f.o.Seed, f.seedSet = s.Seed, true
	}
	return nil
}

// parseRange reads "100ms..500ms" or a single duration
// (campaigns.ParseRange) as a workload's range.
func parseRange(s string) (workloads.Range, error) {
	lo, hi, err := campaigns.ParseRange(s)
	return workloads.Range{Min: lo, Max: hi}, err
}
