package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/runstate"
)

func newCleanupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what crashed runs left behind (their servers and client processes)",
		Long: `Remove what crashed runs left behind. Every run records the processes it
starts (pid and start time), the prefix of its network namespaces and, with
--cluster docker, that it labelled containers and networks with its run id, in ` + runstate.Dir() + ` (so does
every cluster a campaign keeps for several runs: its servers and its namespaces, which hold the
clients' of the runs on it); cleanup kills those
that are still the same processes, only for runs whose harness is gone, and
never touches anything else. Run directories in the store are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stale, err := runstate.Stale()
			if err != nil {
				return exitCode{exitError, err}
			}
			out := cmd.OutOrStdout()
			if len(stale) == 0 {
				fmt.Fprintln(out, "nothing to clean up")
				return nil
			}
			for _, st := range stale {
				fmt.Fprintf(out, "run %s (%s):\n", st.RunID, st.RunDir)
				// Processes first: a namespace goes only when nothing runs in it.
				for _, d := range runstate.Clean(st) {
					fmt.Fprintf(out, "  %s\n", d)
				}
				if st.Docker {
					// Containers, their volumes and the network, by the
					// run's label (clusters/docker).
					if st.DockerHost != "" && os.Getenv("DOCKER_HOST") == "" {
						_ = os.Setenv("DOCKER_HOST", st.DockerHost)
					}
					did, err := docker.Cleanup(cmd.Context(), st.RunID)
					for _, d := range did {
						fmt.Fprintf(out, "  %s\n", d)
					}
					if err != nil {
						fmt.Fprintf(out, "  docker: %v\n", err)
					}
				}
				if len(st.Compose) > 0 {
					did, err := docker.HealContainers(cmd.Context(), st.Compose)
					for _, d := range did {
						fmt.Fprintf(out, "  %s\n", d)
					}
					if err != nil {
						fmt.Fprintf(out, "  docker: %v\n", err)
					}
				}
				if st.NetID != "" {
					names := netns.Names(st.NetID)
					for _, err := range netns.Remove(names) {
						fmt.Fprintf(out, "  %v\n", err)
					}
					if len(names) > 0 {
						fmt.Fprintf(out, "  removed %d network namespaces (%s-*)\n", len(names), st.NetID)
					}
				}
			}
			return nil
		},
	}
}
