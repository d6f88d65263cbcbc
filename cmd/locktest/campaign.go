package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/reports"
)

// Campaign exit codes.
const campaignExitHelp = `Exit codes:
  0    every cell that ran is as expected (or has no expectation)
  1    some cell differs from its expectation: a verdict changed, or a cell
       with an expectation could not run (skipped for a missing server or
       root); see summary.md and index.html
  2    usage or harness error (bad flags or config, including an expected
       verdict for a cell whose fault does not apply to it; a run that
       failed with a harness error: its cell shows "error")
  130  interrupted (Ctrl-C): every finished cell is kept; --resume DIR goes on`

// campaignRunner runs the cells; tests put a fake here.
var campaignRunner campaigns.Runner = campaigns.HarnessRunner{}

// probeCampaign looks at what this machine can run on the cluster
// backend; tests put a fake here.
var probeCampaign = func(ctx context.Context, cluster string) (campaigns.Environment, error) {
	env := campaigns.Probe()
	err := env.ForCluster(ctx, cluster)
	return env, err
}

// CampaignOptions are the flags of `locktest campaign`.
type CampaignOptions struct {
	Locks, Nemeses string
	Config         string
	Resume         string
	Dir            string
	Store          string
	Runs           int
	Seed           int64
	Parallel       int
	Quiet          bool
	Cluster        string
	NoReuse        bool
	StopEarly      bool
	Shard          string
	Fence, Wait    bool
	Settings       campaigns.Settings
	// Shrink: shrink every cell unsafe without being expected to be
	// (locktest shrink), each within ShrinkOpts.Budget.
	Shrink         bool
	ShrinkOpts     ShrinkOptions
	timeLimit, ttl time.Duration
	clients        int
	hold, think    string
	set            func(string) bool
}

// campaignLong is the help text of `locktest campaign`.
const campaignLong = `Run the safety matrix: every lock scheme (--locks, or the cells of a --config
file) under every fault (--nemeses) that applies to its topology, one cell per
pair. A fault a topology cannot take (a failover without a replica, a server
clock jump without the clock shim) is marked n/a, not failed; a fault this
machine cannot inject (a partition without root) is skipped with the reason.

The campaign directory (default store/campaigns/<time>) holds the runs
(runs/...), campaign.json (the state, written after every run: an interrupted
campaign keeps every finished run and --resume DIR goes on), and at the end
index.html (the matrix, each cell linked to the run that proves it),
results.json (schema locktest-campaign/1; every field of it and of a run's
results.json is in docs/results.md), junit.xml (one test case per cell) and
summary.md (for a CI job summary).

A --config file (YAML) gives every cell its expected verdict (safe, unsafe or
either); the exit code then tells whether any cell differed, so a nightly job
catches a change in either direction. See campaigns/nightly.yaml.

Runs whose servers are started alike (same topology, clock shim, network
namespaces and server --param settings) share one cluster of the local
backend, one run after the other: the campaign runs them back to back (the
matrix keeps its order), gives each run a lock key of its own, and keeps a
cluster only after a run that ended normally, with faults that cannot have
changed its shape (never after a failover, nor after a server fault on a
replicated topology), and once every server passes a health check. Pooled
clusters live in clusters/ of the campaign directory (each run's servers/
links there); with --parallel each concurrent run has its own. --no-reuse
starts a cluster for every run. The time spent starting clusters, the starts
saved and the time the workloads ran are in the final summary and
results.json.

Every run stops at the first violation the online checker is certain of
(--stop-early, the default; also "stop_early: false" in a --config file):
the verdict cannot change any more, so the campaign moves on. An unsafe
cell's anomaly counts then cover the run up to that point ("at least", the
pages say so) and its availability the time it ran. --stop-early=false runs
every cell its full --time-limit, for complete counts and availability.
Fenced runs never stop early (fencing may still contain the violation).

--cluster docker starts the
servers in containers instead of host processes (the images of
scripts/build-images.sh); a cell whose topology the docker backend does not
run is n/a, and every cell is skipped when docker or its image is not here.

--shard K/N runs shard K of N of the campaign: a share of its runs that
depends on the plan alone (never on the machine), with the seeds the whole
campaign would use; runs that can share a cluster stay in one shard. N
shards (on N machines, CI jobs or pods) together run the campaign exactly
once; each directory holds its runs, its reports and shard.json (the plan's
identity, the version, K/N, the cells it ran and those it skipped, with
why). locktest report --merge OUT DIR... makes one campaign of them.
--resume DIR resumes a shard as the same shard.

--shrink, once the matrix is done, shrinks every cell that is unsafe
without being expected to be (its expectation safe, or none) with
locktest shrink: its first unsafe run, within --shrink-budget per cell,
into DIR/shrink/<cell> (repro.sh, shrink.json, shrink.html).

` + campaignExitHelp

func newCampaignCmd() *cobra.Command {
	o := &CampaignOptions{}
	c := &cobra.Command{
		Use:   "campaign (--locks LIST|all --nemeses LIST|all | --config FILE | --resume DIR)",
		Short: "Run the safety matrix: every scheme under every fault it can take; HTML, JSON, JUnit, Markdown",
		Long:  campaignLong,
		Example: `  locktest campaign --locks all --nemeses all --time-limit 10s
  locktest campaign --config campaigns/nightly.yaml --shard 2/4 --dir shard-2
  locktest campaign --config campaigns/nightly.yaml
  locktest campaign --locks all --nemeses none,pause --cluster docker
  locktest campaign --resume store/campaigns/20261122T020000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.set = cmd.Flags().Changed
			return runCampaign(cmd, o)
		},
	}
	o.addFlags(c)
	return c
}

// addFlags declares the flags of `locktest campaign` on c.
func (o *CampaignOptions) addFlags(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&o.Locks, "locks", "", "lock schemes, comma separated, or all")
	fl.StringVar(&o.Nemeses, "nemeses", "", "faults, comma separated (a+b combines two in one cell), or all")
	fl.StringVar(&o.Config, "config", "", "campaign file (YAML): cells, their settings and expected verdicts")
	fl.StringVar(&o.Resume, "resume", "", "campaign directory of an interrupted campaign to finish")
	fl.StringVar(&o.Dir, "dir", "", "campaign directory (default STORE/campaigns/<time>)")
	fl.StringVar(&o.Store, "store", "store", "where the campaign directory goes")
	fl.IntVar(&o.Runs, "runs", 1, "runs per cell (seeds --seed, --seed+1, ...)")
	fl.Int64Var(&o.Seed, "seed", 1, "seed of every cell's first run")
	fl.IntVar(&o.Parallel, "parallel", 1, "cells run at once (each has its own servers, ports and namespaces)")
	fl.BoolVar(&o.Quiet, "quiet", false, "plain progress lines instead of a live status line")
	fl.StringVar(&o.Cluster, "cluster", string(clusters.Local), "where every run starts its servers: local (processes on this host) or docker (containers; cells whose topology it does not run are n/a)")
	fl.BoolVar(&o.NoReuse, "no-reuse", false, "start a cluster for every run instead of sharing started ones across cells")
	fl.BoolVar(&o.StopEarly, "stop-early", true, "stop each run at its first certain violation (anomaly counts are then lower bounds); --stop-early=false runs full time limits (overrides stop_early in --config)")
	fl.StringVar(&o.Shard, "shard", "", "run shard K of N of the campaign (e.g. 2/4): a share of its runs fixed by the plan alone, with the whole campaign's seeds; 'locktest report --merge' makes one campaign of the N directories")
	fl.BoolVar(&o.Fence, "fence", false, "with --locks: run every scheme with fencing tokens (schemes without them are refused)")
	fl.BoolVar(&o.Wait, "wait", false, "with --locks: blocking acquires")
	fl.BoolVar(&o.Shrink, "shrink", false, "at the end, shrink every cell that is unsafe without being expected to be (locktest shrink) into DIR/shrink/<cell>")
	fl.DurationVar(&o.ShrinkOpts.Budget, "shrink-budget", 3*time.Minute, "with --shrink: the time each cell's shrink may take")
	fl.IntVar(&o.ShrinkOpts.Tries, "shrink-tries", 2, "with --shrink: runs of a candidate before it counts as not reproducing")
	fl.DurationVar(&o.timeLimit, "time-limit", 30*time.Second, "how long each run's workload lasts")
	fl.DurationVar(&o.ttl, "ttl", time.Second, "lease TTL")
	fl.IntVar(&o.clients, "clients", 5, "client processes per run")
	fl.StringVar(&o.hold, "hold", "50ms..250ms", "critical section, MIN..MAX")
	fl.StringVar(&o.think, "think", "10ms..40ms", "pause between attempts, MIN..MAX")
}

// campaignUsage is a usage error of `locktest campaign`: exit code 2.
func campaignUsage(format string, a ...any) error {
	return exitCode{exitError, fmt.Errorf(format, a...)}
}

// runCampaign reads as its phases: check the flags, plan the campaign
// (resumed, from a --config file or from the lists), take its shard, run
// it and report.
func runCampaign(cmd *cobra.Command, o *CampaignOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	var k, n int
	if o.Shard != "" {
		var err error
		if k, n, err = campaigns.ParseShard(o.Shard); err != nil {
			return campaignUsage("%v", err)
		}
	}
	env, err := probeCampaign(cmd.Context(), o.Cluster)
	if err != nil {
		return campaignUsage("--cluster: %v", err)
	}
	var camp *reports.Campaign
	var shard *campaigns.Shard
	dir := o.Dir
	switch {
	case o.Resume != "":
		dir = o.Resume
		camp, shard, err = o.resume(k, n)
	case o.Config != "":
		camp, err = o.planConfig(env)
	default:
		camp, err = o.planLists(env)
	}
	if err != nil {
		return err
	}
	if o.Shard != "" && o.Resume == "" {
		if camp, shard, err = campaigns.SplitShard(camp, k, n); err != nil {
			return campaignUsage("%v", err)
		}
	}
	if dir == "" {
		dir = newCampaignDir(o.Store, shard)
	}
	return o.run(cmd, camp, shard, dir)
}

// check refuses flags that cannot go together or are out of range.
func (o *CampaignOptions) check() error {
	modes := 0
	for _, b := range []bool{o.Locks != "" || o.Nemeses != "", o.Config != "", o.Resume != ""} {
		if b {
			modes++
		}
	}
	switch {
	case modes != 1:
		return campaignUsage("give exactly one of --locks/--nemeses, --config or --resume (see locktest campaign --help)")
	case o.Parallel < 1 || o.Parallel > 16:
		return campaignUsage("--parallel must be 1..16 (got %d)", o.Parallel)
	case o.Runs < 1 || o.Runs > 100:
		return campaignUsage("--runs must be 1..100 (got %d)", o.Runs)
	}
	o.ShrinkOpts.Confirm, o.ShrinkOpts.MinClients = 3, 2
	if err := o.ShrinkOpts.check("--shrink-"); o.Shrink && err != nil {
		return campaignUsage("%v", err)
	}
	return nil
}

// flagSettings are the run settings given on the command line.
func (o *CampaignOptions) flagSettings() campaigns.Settings {
	flags := campaigns.Settings{}
	if o.set("time-limit") {
		flags.TimeLimit = campaigns.Duration(o.timeLimit)
	}
	if o.set("ttl") {
		flags.TTL = campaigns.Duration(o.ttl)
	}
	if o.set("clients") {
		flags.Clients = o.clients
	}
	if o.set("hold") {
		flags.Hold = o.hold
	}
	if o.set("think") {
		flags.Think = o.think
	}
	return flags
}

// resume loads the interrupted campaign in --resume DIR, and its shard
// (nil for a whole campaign), which must be shard k of n when --shard says
// so.
func (o *CampaignOptions) resume(k, n int) (*reports.Campaign, *campaigns.Shard, error) {
	dir := o.Resume
	camp, err := campaigns.Load(dir)
	if err != nil {
		return nil, nil, campaignUsage("resume: %v", err)
	}
	was := camp.Cluster
	if was == "" {
		was = campaigns.ClusterLocal
	}
	if o.set("cluster") && o.Cluster != was {
		return nil, nil, campaignUsage("resume: the campaign runs on --cluster %s, not %s", was, o.Cluster)
	}
	if o.set("stop-early") && o.StopEarly != camp.StopsEarly() {
		return nil, nil, campaignUsage("resume: the campaign runs with --stop-early=%v, not %v", camp.StopsEarly(), o.StopEarly)
	}
	// A shard resumes as the shard it is.
	shard, err := campaigns.LoadShard(dir)
	switch {
	case errors.Is(err, campaigns.ErrNotShard):
		shard = nil
		if o.Shard != "" {
			return nil, nil, campaignUsage("resume: %s is a whole campaign, not shard %s", dir, o.Shard)
		}
	case err != nil:
		return nil, nil, campaignUsage("resume: %v", err)
	case o.Shard != "" && (shard.K != k || shard.N != n):
		return nil, nil, campaignUsage("resume: %s is shard %s, not %s", dir, shard.Name(), o.Shard)
	}
	return camp, shard, nil
}

// planConfig plans the campaign of the --config file; flags given on the
// command line override the file's defaults.
func (o *CampaignOptions) planConfig(env campaigns.Environment) (*reports.Campaign, error) {
	cfg, err := campaigns.LoadConfig(o.Config)
	if err != nil {
		return nil, campaignUsage("%v", err)
	}
	cfg.Defaults = o.flagSettings().Merge(cfg.Defaults)
	if o.set("runs") {
		cfg.Runs = o.Runs
	}
	if o.set("seed") {
		cfg.Seed = &o.Seed
	}
	if o.set("stop-early") {
		cfg.StopEarly = &o.StopEarly
	}
	camp, err := campaigns.PlanConfig(cfg, env)
	if err != nil {
		return nil, campaignUsage("%s: %v", o.Config, err)
	}
	camp.Config = o.Config
	if camp.Name == "" {
		camp.Name = strings.TrimSuffix(filepath.Base(o.Config), filepath.Ext(o.Config))
	}
	return camp, nil
}

// planLists plans the campaign of --locks and --nemeses.
func (o *CampaignOptions) planLists(env campaigns.Environment) (*reports.Campaign, error) {
	if o.Locks == "" || o.Nemeses == "" {
		return nil, campaignUsage("--locks and --nemeses go together")
	}
	set := o.flagSettings().Merge(campaigns.Settings{TimeLimit: campaigns.Duration(o.timeLimit)})
	camp, err := campaigns.PlanLists(campaigns.Lists{Locks: o.Locks, Nemeses: o.Nemeses, Settings: set, Fence: o.Fence, Wait: o.Wait}, env)
	if err != nil {
		return nil, campaignUsage("%v", err)
	}
	camp.Runs, camp.Seed, camp.StopEarly = o.Runs, o.Seed, &o.StopEarly
	camp.Name = "adhoc"
	return camp, nil
}

// newCampaignDir is a new campaign's directory under store: its start
// time, and the shard it runs.
func newCampaignDir(store string, shard *campaigns.Shard) string {
	dir := filepath.Join(store, "campaigns", time.Now().Format("20060102T150405"))
	if shard != nil {
		dir += fmt.Sprintf("-shard%dof%d", shard.K, shard.N)
	}
	return dir
}

// run runs the planned campaign in dir, prints its totals and returns its
// exit code.
func (o *CampaignOptions) run(cmd *cobra.Command, camp *reports.Campaign, shard *campaigns.Shard, dir string) error {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "campaign directory: %s\n", dir)
	if shard != nil {
		runs := 0
		for _, c := range shard.Cells {
			runs += len(c.Seeds)
		}
		fmt.Fprintf(out, "shard %s of campaign plan %s: %d of %d cells, %d of %d runs\n", shard.Name(), shard.Plan, len(shard.Cells), shard.PlanCells, runs, shard.PlanRuns)
	}
	err := campaigns.Run(cmd.Context(), camp, campaigns.Options{
		Dir: dir, Runner: campaignRunner, Parallel: o.Parallel, Out: out,
		Live: !o.Quiet && isTerminal(out), Command: strings.Join(os.Args, " "), NoReuse: o.NoReuse, Shard: shard,
	})
	if err != nil {
		return exitCode{exitError, err}
	}
	fmt.Fprintf(out, "report: %s\n", filepath.Join(dir, campaigns.IndexFile))
	printCampaignTotals(cmd, camp)
	if o.Shrink && !camp.Interrupted {
		shrinkCells(cmd.Context(), dir, camp, o.ShrinkOpts, out)
		if cmd.Context().Err() != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "locktest: interrupted while shrinking; the campaign is complete (%s), the shrinks made so far are in %s\n",
				filepath.Join(dir, campaigns.IndexFile), filepath.Join(dir, campaignShrinkDir))
			return exitCode{code: exitInterrupted}
		}
	}
	if camp.Interrupted {
		fmt.Fprintf(cmd.ErrOrStderr(), "locktest: interrupted; finished cells kept; go on with `locktest campaign --resume %s`\n", dir)
		return exitCode{code: exitInterrupted}
	}
	return exitCode{code: campaignCode(camp)}
}

// campaignCode maps a finished campaign to its exit code.
func campaignCode(c *reports.Campaign) int {
	for _, cell := range c.Cells {
		if cell.Status == reports.CellError {
			return exitError
		}
	}
	if c.Differs() > 0 {
		return exitUnsafe
	}
	return exitSafe
}

func printCampaignTotals(cmd *cobra.Command, c *reports.Campaign) {
	n := map[string]int{}
	for i := range c.Cells {
		n[reports.CellClass(&c.Cells[i])]++
	}
	interrupted := ""
	if n["interrupted"] > 0 {
		interrupted = fmt.Sprintf(", %d interrupted", n["interrupted"])
	}
	fmt.Fprintf(cmd.OutOrStdout(), "cells: %d safe, %d unsafe, %d inconclusive, %d error, %d n/a, %d skipped, %d not run%s; %d differ from expectation\n",
		n["safe"], n["unsafe"], n["inconclusive"], n["error"], n["na"], n["skipped"], n["pending"], interrupted, c.Differs())
	if c.Interrupted {
		ran, planned := c.Ran()
		fmt.Fprintf(cmd.OutOrStdout(), "interrupted: %d of %d cells ran\n", ran, planned)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wall time %s: cluster start-up %s (%s; %d clusters started, %d runs on a reused cluster: %d starts saved), workloads %s (%s)\n",
		time.Duration(c.WallNs).Round(100*time.Millisecond), time.Duration(c.StartupNs).Round(time.Millisecond), c.Share(c.StartupNs),
		c.ClusterStarts, c.ClusterReuses, c.ClusterReuses, time.Duration(c.WorkloadNs).Round(100*time.Millisecond), c.Share(c.WorkloadNs))
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
