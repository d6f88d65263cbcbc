package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters"
)

func newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say what is missing to run every scheme and fault, with the install command",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			var topologies []string
			for t := range clusters.Requirements {
				topologies = append(topologies, t)
			}
			sort.Strings(topologies)
			var missing []clusters.Requirement
			for _, t := range topologies {
				for _, r := range clusters.Requirements[t] {
					if p, err := clusters.Find(r); err == nil {
						fmt.Fprintf(out, "ok       %-16s %s (for %s)\n", r.Binary, p, t)
					} else {
						fmt.Fprintf(out, "MISSING  %-16s package %s (for %s)\n", r.Binary, r.Package, t)
						missing = append(missing, r)
					}
				}
			}
			if os.Geteuid() == 0 {
				fmt.Fprintln(out, "ok       root             every fault is available")
			} else {
				fmt.Fprintln(out, "note     not root         pause, pause-server, kill and crash-client work without root")
			}
			if len(missing) > 0 {
				return exitCode{exitError, clusters.MissingError(missing)}
			}
			fmt.Fprintln(out, "everything locktest needs is installed")
			return nil
		},
	}
}
