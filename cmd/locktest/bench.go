package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
)

func newBenchCmd() *cobra.Command {
	f := &runFlags{}
	var runs int
	c := &cobra.Command{
		Use:   "bench --lock LIST --nemesis LIST [--runs 3]",
		Short: "Measure cells over several seeds: start-up, throughput, time from fault to first violation",
		Long: `Measure cells over several seeds. For every lock x nemesis pair it runs
--runs runs (seeds --seed, --seed+1, ...) and prints medians: cluster start-up
time, successful acquires per second, and for unsafe runs the time from the
start of the fault that preceded the first violation to that violation. The machine may be
shared and noisy: read medians and ratios, not single figures.`,
		Example: "  locktest bench --lock redis-lua,redlock --nemesis pause,clock --runs 3 --time-limit 10s\n  locktest bench --cluster docker --lock zk,etcd --runs 5 --time-limit 1s   # start-up on containers",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, f, runs)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.o.Lock, "lock", "redis-lua", "lock schemes, comma separated")
	fl.StringVar(&f.o.Nemesis, "nemesis", "none", "nemeses, comma separated: one cell each (use + to combine, e.g. pause+kill)")
	fl.IntVar(&runs, "runs", 3, "runs per cell")
	fl.DurationVar(&f.o.TimeLimit, "time-limit", 10*time.Second, "how long each run's workload lasts")
	fl.IntVar(&f.o.Clients, "clients", 5, "client processes")
	fl.DurationVar(&f.o.TTL, "ttl", time.Second, "lease TTL")
	fl.StringVar(&f.hold, "hold", "50ms..250ms", "critical section, MIN..MAX")
	fl.StringVar(&f.think, "think", "10ms..40ms", "pause between attempts, MIN..MAX")
	fl.Int64Var(&f.o.Seed, "seed", 1, "seed of the first run")
	fl.DurationVar(&f.o.OpTimeout, "op-timeout", time.Second, "deadline of one request")
	fl.DurationVar(&f.o.WaitTimeout, "wait-timeout", 5*time.Second, "how long a blocking acquire waits")
	fl.StringVar(&f.o.Store, "store", "store", "directory that keeps every run")
	fl.Var(paramsFlag{m: &f.o.Params}, "param", "scheme or server setting KEY=VALUE (each key once)")
	fl.StringVar(&f.o.Cluster, "cluster", string(clusters.Local), "where the servers run: local, docker or compose (see locktest run --help)")
	fl.Var(paramsFlag{m: &f.o.Images, name: "image"}, "image", "with --cluster docker: image per server kind, KIND=IMAGE")
	fl.StringVar(&f.o.Topology, "topology", "", "servers to run the schemes on, when they run on more than their own (e.g. mysql-replicated)")
	return c
}

type benchRow struct {
	lock, nem                 string
	na                        string // "n/a: why" or "skipped: why": the cell cannot run (matrix.Applicable)
	verdicts                  []string
	startup, rate, detect     []float64
	violations, runs, errored int
	// byPoint: fault -> violation times by the fault point of the fault
	// (after-grant, after-check, ...; "-" for a fault with none).
	byPoint map[string][]float64
}

func runBench(cmd *cobra.Command, f *runFlags, runs int) error {
	var err error
	if f.o.Hold, err = parseRange(f.hold); err != nil {
		return exitCode{exitError, fmt.Errorf("--hold: %w", err)}
	}
	if f.o.Think, err = parseRange(f.think); err != nil {
		return exitCode{exitError, fmt.Errorf("--think: %w", err)}
	}
	if runs < 1 || runs > 100 {
		return exitCode{exitError, fmt.Errorf("--runs must be 1..100 (got %d)", runs)}
	}
	out := cmd.OutOrStdout()
	var rows []*benchRow
	for _, lock := range strings.Split(f.o.Lock, ",") {
		for _, nem := range strings.Split(f.o.Nemesis, ",") {
			row := &benchRow{lock: lock, nem: nem, byPoint: map[string][]float64{}}
			rows = append(rows, row)
			if row.na = benchNA(f.o, lock, nem); row.na != "" {
				fmt.Fprintf(out, "  %s / %s: %s\n", lock, nem, row.na)
				continue
			}
			for i := 0; i < runs; i++ {
				o := f.o
				o.Lock, o.Nemesis = lock, strings.ReplaceAll(nem, "+", ",")
				o.Seed = f.o.Seed + int64(i)
				o.Quiet, o.Out = true, io.Discard
				res, err := harness.Run(cmd.Context(), o)
				if cmd.Context().Err() != nil {
					return exitCode{code: exitInterrupted}
				}
				row.runs++
				if err != nil {
					row.errored++
					fmt.Fprintf(cmd.ErrOrStderr(), "locktest bench: %s/%s seed %d: %v\n", lock, nem, o.Seed, err)
					continue
				}
				r := res.Result
				row.verdicts = append(row.verdicts, string(r.Verdict))
				row.startup = append(row.startup, float64(res.Startup.Milliseconds()))
				if d := r.Counts.DurationNs; d > 0 {
					row.rate = append(row.rate, float64(r.Counts.AcquiresOK)/(float64(d)/1e9))
				}
				h, herr := history.Load(filepath.Join(res.Dir, "history.jsonl"))
				if herr != nil {
					h = &history.History{}
				}
				if t, ok := firstDamage(r, h); ok {
					row.violations++
					if ff, ok := faultBefore(h, t); ok {
						row.detect = append(row.detect, float64(t-ff.Start)/1e6)
						point := ff.Point
						if point == "" {
							point = "-"
						}
						row.byPoint[point] = append(row.byPoint[point], float64(t-ff.Start)/1e6)
					}
				}
				fmt.Fprintf(out, "  %s / %s seed %d: %s (%s)\n", lock, nem, o.Seed, r.Verdict, r.Why)
			}
		}
	}
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nLOCK\tNEMESIS\tRUNS\tVERDICTS\tSTART-UP ms (median)\tACQUIRES/s (median)\tFAULT -> VIOLATION ms (median, min-max)\tBY FAULT POINT (median ms, runs)\t")
	for _, r := range rows {
		if r.na != "" {
			fmt.Fprintf(w, "%s\t%s\t0\t%s\t-\t-\t-\t-\t\n", r.lock, r.nem, strings.SplitN(r.na, ":", 2)[0])
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.lock, r.nem, r.runs, tally(r.verdicts, r.errored),
			med(r.startup, "%.0f"), med(r.rate, "%.1f"), detect(r.detect), byPoint(r.byPoint))
	}
	return w.Flush()
}

// benchNA says why the cell of lock under faults nem (a+b) cannot run
// here, as a campaign would ("n/a: ..." or "skipped: ..."), "" when it can
// or when its options are wrong some other way (the run says how).
func benchNA(o harness.Options, lock, nem string) string {
	s, ok := locks.Lookup(lock)
	if !ok || o.ClientCmd != "" {
		return ""
	}
	m := matrix.Probe()
	m.Cluster = o.Cluster
	a := matrix.Applicable(matrix.Cell{Scheme: s, Topology: o.Topology, Faults: strings.Split(nem, "+"), Params: o.Params}, m)
	if a.Status == matrix.NotApplicable || a.Status == matrix.Skipped {
		return a.Status.String() + ": " + a.Reason()
	}
	return ""
}

// firstDamage is when the first violation happened: the start of the
// earliest double holder, foreign release, lost update... (a
// non-linearizable anomaly starts at the first operation it names, which
// can precede the fault that caused it, so it is left out). An anomaly
// that starts before any fault of h began (a lost update whose write was
// sent just before its client stopped itself at after-check) counts from
// its end, when the damage landed.
func firstDamage(r checker.Result, h *history.History) (int64, bool) {
	t, ok := int64(0), false
	for _, a := range r.Anomalies {
		if a.Severity != checker.SeverityViolation || a.Kind == checker.KindNonLinearizable {
			continue
		}
		at := a.Start
		if _, before := faultBefore(h, at); !before && len(h.Faults) > 0 {
			at = a.End
		}
		if !ok || at < t {
			t, ok = at, true
		}
	}
	return t, ok
}

// faultBefore returns the last fault of h that began at or before t.
func faultBefore(h *history.History, t int64) (history.Fault, bool) {
	last, ok := history.Fault{}, false
	for _, f := range h.Faults {
		if f.Start <= t {
			last, ok = f, true
		}
	}
	return last, ok
}

// byPoint renders the fault -> violation medians by fault point:
// "after-check 1702 (3), after-grant 2040 (1)".
func byPoint(m map[string][]float64) string {
	if len(m) == 0 {
		return "-"
	}
	points := make([]string, 0, len(m))
	for p := range m {
		points = append(points, p)
	}
	slices.Sort(points)
	parts := make([]string, 0, len(points))
	for _, p := range points {
		parts = append(parts, fmt.Sprintf("%s %.0f (%d)", p, median(m[p]), len(m[p])))
	}
	return strings.Join(parts, ", ")
}

func tally(vs []string, errored int) string {
	n := map[string]int{}
	for _, v := range vs {
		n[v]++
	}
	var parts []string
	for _, v := range []string{"safe", "unsafe", "inconclusive"} {
		if n[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[v], v))
		}
	}
	if errored > 0 {
		parts = append(parts, fmt.Sprintf("%d error", errored))
	}
	return strings.Join(parts, ", ")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func med(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(xs))
}

func detect(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", median(xs), slices.Min(xs), slices.Max(xs))
}
