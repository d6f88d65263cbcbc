package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/internal/runstate"
)

func newCleanupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what crashed runs left behind (their servers and client processes)",
		Long: `Remove what crashed runs left behind. Every run records, in ` + runstate.Dir() + `
($LOCKTEST_STATE_DIR), the processes it starts (pid and start time), the prefix of its
network namespaces and of the links it plugged into a Docker network's bridge, and,
for a run on containers, that it labelled containers, volumes and networks with its
run id (--cluster docker) or which containers of a compose stack it faulted
(--cluster compose); so does every cluster a campaign keeps for several runs. For
runs whose harness is gone, and for nothing else, cleanup kills those processes
that are still the same processes, removes the run's containers, volumes and
network, thaws, restarts and un-partitions the compose containers, and deletes the
run's links and namespaces. It takes no flags: what to undo comes from the record.
Run directories in the store are kept.`,
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
					// The root ends of the client veths first (on a Docker
					// network's bridge, a compose stack's too): they would
					// outlive their namespaces by minutes.
					links, errs := netns.RemoveLinks(st.NetID)
					for _, err := range errs {
						fmt.Fprintf(out, "  %v\n", err)
					}
					if len(links) > 0 {
						fmt.Fprintf(out, "  removed %d links (%s)\n", len(links), strings.Join(links, ", "))
					}
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
