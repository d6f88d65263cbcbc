package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

func newReportCmd() *cobra.Command {
	var noCheck bool
	c := &cobra.Command{
		Use:   "report DIR",
		Short: "Regenerate the pages of stored runs: a run, a campaign, or every run in a store",
		Long: `Regenerate pages from stored runs, from their histories alone.

  DIR is a run directory (history.jsonl): its results.json, report.html and
      linearization.html.
  DIR is a campaign directory (campaign.json): every run's page, then the
      campaign's index.html, results.json, junit.xml and summary.md, keeping
      the expectations.
  DIR is any other directory (a store): every run below it is checked again
      and DIR/index.html shows them as a matrix (no expectations).

Exit codes: 0 pages written, 2 error.`,
		Example: "  locktest report store/campaigns/20261122T020000\n  locktest report store",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runReport(cmd, args[0], !noCheck); err != nil {
				return exitCode{exitError, err}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&noCheck, "no-check", false, "read the runs' results.json instead of checking their histories again")
	return c
}

func runReport(cmd *cobra.Command, dir string, recheck bool) error {
	var check campaigns.Checker
	if recheck {
		check = func(d string) (*checker.Result, error) { return harness.CheckDir(d, nil, true) }
	}
	out := cmd.OutOrStdout()
	if _, err := os.Stat(filepath.Join(dir, "history.jsonl")); err == nil {
		if _, err := harness.CheckDir(dir, nil, true); err != nil {
			return err
		}
		fmt.Fprintf(out, "report: %s\n", filepath.Join(dir, "report.html"))
		return nil
	}
	camp, err := campaigns.Load(dir)
	switch {
	case err == nil:
		if err := campaigns.Refresh(dir, camp, check); err != nil {
			return err
		}
	case os.IsNotExist(err):
		if camp, err = campaigns.FromRuns(dir, check); err != nil {
			return err
		}
	default:
		return err
	}
	if err := campaigns.WriteReports(dir, camp); err != nil {
		return err
	}
	fmt.Fprintf(out, "report: %s (%d cells)\n", filepath.Join(dir, campaigns.IndexFile), len(camp.Cells))
	return nil
}
