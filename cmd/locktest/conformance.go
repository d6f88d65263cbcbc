package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/conformance"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/protocol"
)

func newConformanceCmd() *cobra.Command {
	var clientCmd, topology string
	var ttl, deadline time.Duration
	var fence bool
	c := &cobra.Command{
		Use:   "conformance --client-cmd CMD [--topology redis]",
		Short: "Check that your client program speaks the protocol, against a real server, with no fault",
		Long: `Check that a client program speaks locktest's protocol (docs/protocol.md),
against a real server of --topology and with no fault: two copies of it take
turns on the lock while every reply is checked for its form (JSON, id,
outcome, reason, owner, token) and for what a correct lock answers. Each
check prints one line; fix every FAIL before trusting a verdict.

Exit codes: 0 no violation, 1 violations found, 2 usage or harness error.`,
		Example: `  locktest conformance --client-cmd "python3 examples/redis-py/client.py" --topology redis`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clientCmd == "" {
				return exitCode{exitError, fmt.Errorf("--client-cmd is required")}
			}
			if m := clusters.Missing(topology); len(m) > 0 {
				return exitCode{exitError, clusters.MissingError(m)}
			}
			dir, err := os.MkdirTemp("", "locktest-conformance")
			if err != nil {
				return exitCode{exitError, err}
			}
			defer os.RemoveAll(dir)
			tracker, err := runstate.Open(fmt.Sprintf("conformance-%d", os.Getpid()), dir)
			if err != nil {
				return exitCode{exitError, err}
			}
			defer tracker.Close()
			ctx := cmd.Context()
			cl, err := local.Backend{}.Start(ctx, clusters.Spec{Topology: topology, Dir: dir, Tracker: tracker})
			if err != nil {
				return exitCode{exitError, fmt.Errorf("start %s: %w", topology, err)}
			}
			defer cl.Stop(context.Background())
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "conformance of %q against %s (%v)\n", clientCmd, topology, cl.Addrs())
			hello := protocol.Hello{Lock: "client-cmd", Servers: cl.Addrs(), Key: "locktest:conformance",
				TTLMillis: ttl.Milliseconds(), Fence: fence, OpTimeoutMs: 1000, WaitTimeoutMs: 2000, Seed: 1}
			rep := conformance.Run([]string{"sh", "-c", "exec " + clientCmd}, hello, deadline, cmd.ErrOrStderr())
			for _, f := range rep.Findings {
				mark := "ok  "
				if !f.OK {
					mark = "FAIL"
				}
				fmt.Fprintf(out, "%s  %-24s %s\n", mark, f.Step, f.Detail)
			}
			if rep.Violations > 0 {
				fmt.Fprintf(out, "%d protocol violation(s)\n", rep.Violations)
				return exitCode{code: exitUnsafe}
			}
			fmt.Fprintln(out, "no protocol violation")
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&clientCmd, "client-cmd", "", "shell command that runs your client program")
	fl.StringVar(&topology, "topology", "redis", "servers to run it against")
	fl.DurationVar(&ttl, "ttl", 5*time.Second, "lease TTL passed to the client")
	fl.DurationVar(&deadline, "deadline", 5*time.Second, "how long the program may take to answer one request")
	fl.BoolVar(&fence, "fence", false, "ask for fencing tokens")
	return c
}
