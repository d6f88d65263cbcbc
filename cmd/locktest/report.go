package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
)

func newReportCmd() *cobra.Command {
	var noCheck bool
	var merge string
	c := &cobra.Command{
		Use:   "report DIR | --merge OUT DIR...",
		Short: "Regenerate the pages of stored runs: a run, a campaign, or every run in a store",
		Long: `Regenerate pages from stored runs, from their histories alone.

  DIR is a run directory (history.jsonl): its results.json, report.html and
      linearization.html.
  DIR is a campaign directory (campaign.json): every run's page, then the
      campaign's index.html, results.json, junit.xml and summary.md, keeping
      the expectations.
  DIR is any other directory (a store): every run below it is checked again
      and DIR/index.html shows them as a matrix (no expectations).

--merge OUT DIR... makes one campaign of the shard directories of one
campaign (locktest campaign --shard K/N): OUT gets the matrix (index.html),
results.json, junit.xml and summary.md as if one machine had run it, each
shard's runs (OUT/shard-K/runs) and shards.json (which shard ran where). A
cell a shard skipped on its machine shows as skipped, with the shard. It
refuses, exit 2, a missing shard, a shard given twice, shards of another
campaign config, version or shard count, a run two shards hold, and an
unfinished shard.

Exit codes: 0 pages written; with --merge, as locktest campaign: 0 every
cell as expected, 1 some cell differs from its expectation, 2 error or
refused input.`,
		Example: "  locktest report store/campaigns/20261122T020000\n  locktest report store\n  locktest report --merge merged shard-1 shard-2 shard-3",
		Args: func(cmd *cobra.Command, args []string) error {
			if merge != "" {
				return cobra.MinimumNArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if merge != "" {
				return runMerge(cmd, merge, args)
			}
			if err := runReport(cmd, args[0], !noCheck); err != nil {
				return exitCode{exitError, err}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&noCheck, "no-check", false, "read the runs' results.json instead of checking their histories again")
	c.Flags().StringVar(&merge, "merge", "", "merge the shard directories DIR... of one campaign into the campaign directory OUT")
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

// runMerge writes the campaign of the shard directories dirs into out and
// exits as the campaign would.
func runMerge(cmd *cobra.Command, out string, dirs []string) error {
	camp, shards, err := campaigns.Merge(dirs)
	if err != nil {
		return exitCode{exitError, err}
	}
	if abs, _ := filepath.Abs(out); abs != "" {
		for _, s := range shards {
			if a, _ := filepath.Abs(s.From); a == abs {
				return exitCode{exitError, fmt.Errorf("merge: OUT %s is one of the shards", out)}
			}
		}
	}
	if err := prepareMergeDir(out); err != nil {
		return exitCode{exitError, err}
	}
	camp.Command = strings.Join(os.Args, " ")
	if err := campaigns.CopyRuns(out, camp, shards); err != nil {
		return exitCode{exitError, err}
	}
	if err := campaigns.WriteMerged(out, camp, shards); err != nil {
		return exitCode{exitError, err}
	}
	w := cmd.OutOrStdout()
	for _, s := range shards {
		fmt.Fprintf(w, "shard %s (%s, %s): %d cells ran, %d skipped, %d n/a, wall time %s\n", s.Name(), s.From, orDash(s.Host),
			len(s.Ran), len(s.Skipped), len(s.NA), time.Duration(s.WallNs).Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "report: %s (%d cells from %d shards)\n", filepath.Join(out, campaigns.IndexFile), len(camp.Cells), len(shards))
	printCampaignTotals(cmd, camp)
	return exitCode{code: campaignCode(camp)}
}

// prepareMergeDir makes out ready for a merge: a new or empty directory,
// or the output of an earlier merge (its shards.json).
func prepareMergeDir(out string) error {
	ents, err := os.ReadDir(out)
	if os.IsNotExist(err) {
		return os.MkdirAll(out, 0o755)
	}
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, campaigns.MergedFile)); err != nil {
		return fmt.Errorf("merge: %s is neither empty nor an earlier merge (no %s)", out, campaigns.MergedFile)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
