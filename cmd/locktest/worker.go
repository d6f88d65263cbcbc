package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/workloads"
)

func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "Run as a client process (started by the controller; speaks the pipe protocol)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workloads.Serve(cmd.Context(), os.Stdin, os.Stdout); err != nil {
				return exitCode{exitError, err}
			}
			return nil
		},
	}
}
