// Command lostgen writes a run directory holding a generated fault-heavy
// lock history (history.jsonl, which `locktest check DIR` reads) and its
// ground truth (truth.json). See package internal/lostgen.
//
// Exit codes: 0 written, 2 bad flags or config, 1 any other error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/locktest/locktest/internal/lostgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lostgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c lostgen.Config
	var out, mix string
	fs.IntVar(&c.Ops, "ops", 1000, "operations to invoke")
	fs.IntVar(&c.Clients, "clients", 50, "clients")
	fs.Float64Var(&c.Lost, "lost", 0.01, "fraction of acquires and releases whose reply is lost")
	fs.IntVar(&c.Double, "double", 0, "double grants to inject")
	fs.StringVar(&mix, "mix", string(lostgen.MixMixed), "which double grants: any, certain, explainable, mixed")
	fs.Int64Var(&c.Seed, "seed", 1, "seed")
	fs.DurationVar(&c.Lease, "lease", 50*time.Millisecond, "lease TTL")
	fs.BoolVar(&c.NoExpiry, "no-expiry", false, "the lock never expires")
	fs.DurationVar(&c.OpTimeout, "timeout", time.Second, "op timeout: when a lost reply is recorded")
	fs.BoolVar(&c.Resource, "resource", false, "holders read and write the guarded resource")
	fs.Int64Var(&c.DeadlockMs, "deadlock-ms", 10000, "the liveness threshold the history states (RunInfo.DeadlockMs)")
	fs.IntVar(&c.DeafClient, "deaf-client", 0, "a client that hears no reply to its acquires and releases for a stretch, though the server applies them at once (0: none)")
	fs.DurationVar(&c.DeafFrom, "deaf-from", 0, "when the deaf client's stretch starts")
	fs.DurationVar(&c.DeafFor, "deaf-for", 0, "how long it lasts")
	fs.DurationVar(&c.DeafTimeout, "deaf-timeout", 0, "the deaf client's op timeout, after which it retries at once (default: the lease)")
	fs.StringVar(&out, "out", "", "run directory to write (required; history.jsonl must not exist in it)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.Mix = lostgen.Mix(mix)
	if out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "lostgen: -out DIR is required and no arguments are taken")
		return 2
	}
	t0 := time.Now()
	t, err := lostgen.WriteDir(out, c)
	if err != nil {
		fmt.Fprintf(stderr, "lostgen: %v\n", err)
		if errors.Is(err, lostgen.ErrConfig) {
			return 2
		}
		return 1
	}
	counts := map[lostgen.Label]int{}
	for _, in := range t.Injections {
		counts[in.Label]++
	}
	fmt.Fprintf(stdout, "%s: %d ops, %d events, %.1f s of run; lost %d (applied %d, granted %d), open lost max %d mean %.1f; injections %d (certain %d, explainable %d, unknown %d); linearizable: %s (%s); longest stretch without an ok grant %.2f s (%d lost grants, %d refusals under them, %d under known holders) [%.1fs]\n",
		out, t.Ops, t.Events, float64(t.End)/1e9, t.Lost, t.LostApplied, t.LostGranted, t.MaxOpenLost, t.MeanOpen,
		len(t.Injections), counts[lostgen.Certain], counts[lostgen.Explainable], counts[lostgen.Unknown], t.Linearizable, t.Why,
		float64(t.Unavailable.To-t.Unavailable.From)/1e9, t.Unavailable.LostGrants, t.Unavailable.RefusedUnderLost, t.Unavailable.RefusedUnderKnown, time.Since(t0).Seconds())
	return 0
}
