package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/harness"
)

func newCheckCmd() *cobra.Command {
	var quiet bool
	c := &cobra.Command{
		Use:   "check RUN_DIR",
		Short: "Check a stored run again from its history.jsonl",
		Long: `Check a stored run again from its history.jsonl alone, rewriting its
results.json, report.html and linearization.html (porcupine's view), and
each anomaly's witness: witness-<n>/history.jsonl, the fewest operations and
faults of the run that still show anomaly #n (itself a run directory that
check reads).

` + exitCodesHelp,
		Example: "  locktest check store/latest",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if _, err := os.Stat(filepath.Join(dir, "history.jsonl")); err != nil {
				return exitCode{exitError, fmt.Errorf("%s is not a run directory: no history.jsonl", dir)}
			}
			res, err := harness.CheckDirContext(cmd.Context(), dir, cmd.OutOrStdout(), quiet)
			if err != nil {
				return exitCode{exitError, err}
			}
			if res.CheckInterrupted {
				return exitCode{exitInterrupted, fmt.Errorf("check interrupted: results.json has the properties decided so far, the others \"interrupted\"")}
			}
			return exitCode{code: verdictCode(res.Verdict)}
		},
	}
	c.Flags().BoolVar(&quiet, "quiet", false, "no colours")
	return c
}
