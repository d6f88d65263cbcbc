// Command locktest is a fault-injection harness for distributed locks: it
// starts real servers, drives a lock scheme from several client processes,
// injects faults, records every operation and checks the history.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

// Exit codes, documented in --help.
const (
	exitSafe         = 0
	exitUnsafe       = 1
	exitError        = 2
	exitInconclusive = 3
	exitInterrupted  = 130
)

const exitCodesHelp = `Exit codes:
  0    safe: every property held and the run proved something
  1    unsafe: a safety or liveness property failed (see results.json)
  2    usage or harness error (bad flags, a missing server, a misbehaving client)
  3    inconclusive: the run proves nothing either way (too few acquires,
       a fault that never struck while the lock was held, a check that
       could not decide)
  130  interrupted (Ctrl-C); what was recorded is kept and checked`

// exitCode carries a process exit code out of a command.
type exitCode struct {
	code int
	err  error // printed when not nil
}

func (e exitCode) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func verdictCode(v checker.Verdict) int {
	switch v {
	case checker.Safe:
		return exitSafe
	case checker.Unsafe:
		return exitUnsafe
	default:
		return exitInconclusive
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "locktest",
		Short: "Fault-injection and correctness harness for distributed locks",
		Long: `locktest starts real servers (Redis, Sentinel, MariaDB, ZooKeeper, etcd; as
processes or Docker containers), runs a lock scheme from several client
processes under a seeded concurrent workload, injects faults aimed at the
lock holder (client pauses like a stop-the-world GC, client crashes, server
pauses and crashes, network partitions, server and client clock jumps,
primary failovers; ` + "`locktest list`" + ` has them all), records every operation and
checks the history for double holders, foreign releases, fencing tokens
granted twice, lost updates, deadlocks and linearizability.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       harness.Version,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitCode{exitError, fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddCommand(newRunCmd(), newCheckCmd(), newListCmd(), newDoctorCmd(), newCleanupCmd(), newBenchCmd(), newConformanceCmd(), newWorkerCmd())
	root.AddCommand(newCampaignCmd(), newReportCmd(), newServeCmd(), newShrinkCmd())
	return root
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	// A closed stdout (locktest run ... | head) must not kill the run before
	// it heals its faults and stops its servers: with SIGPIPE caught, writes
	// fail with EPIPE instead.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := newRoot().ExecuteContext(ctx)
	code := exitSafe
	var ec exitCode
	switch {
	case err == nil:
	case errors.As(err, &ec):
		code = ec.code
		if ec.err != nil {
			fmt.Fprintln(os.Stderr, "locktest:", ec.err)
		}
	default:
		// Cobra's own errors (unknown command, bad args) are usage errors.
		code = exitError
		fmt.Fprintln(os.Stderr, "locktest:", err)
	}
	cancel()
	os.Exit(code)
}
