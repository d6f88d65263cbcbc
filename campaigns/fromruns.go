package campaigns

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/shrink"
)

// Checker checks a stored run again, rewriting its results.json and
// report.html (harness.CheckDir without output); nil reads the stored
// results.json as it is.
type Checker func(dir string) (*checker.Result, error)

// Refresh re-reads (or, with check, re-checks) every run of a campaign and
// recomputes its cells, keeping their expectations.
func Refresh(dir string, c *reports.Campaign, check Checker) error {
	for i := range c.Cells {
		cell := &c.Cells[i]
		for k := range cell.Runs {
			run := &cell.Runs[k]
			if run.Dir == "" || run.Verdict == "error" {
				continue
			}
			res, err := result(filepath.Join(dir, filepath.FromSlash(run.Dir)), check)
			if err != nil {
				return fmt.Errorf("cell %s: %w", cell.ID, err)
			}
			FillRun(run, res)
		}
		cell.Summarize()
	}
	return nil
}

func result(runDir string, check Checker) (*checker.Result, error) {
	if check != nil {
		return check(runDir)
	}
	return reports.ReadResultsJSON(filepath.Join(runDir, "results.json"))
}

// FromRuns builds a campaign, with no expectations, from every run
// directory found below dir (a directory with a history.jsonl): one cell
// per lock variant and fault combination, one run per stored run. An
// interrupted run is kept on record but counts in nothing when a finished
// run of the same cell and seed exists, and shows as "interrupted"
// otherwise (reports.Cell.Summarize).
func FromRuns(dir string, check Checker) (*reports.Campaign, error) {
	var runDirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 { // store/latest
			return nil
		}
		if d.IsDir() && (harness.IsWitnessDir(p) || isShrinkDir(p)) { // a run's witness, a shrink's candidates: not runs
			return fs.SkipDir
		}
		if !d.IsDir() && d.Name() == "history.jsonl" {
			runDirs = append(runDirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(runDirs) == 0 {
		return nil, fmt.Errorf("no runs below %s (a run directory holds history.jsonl)", dir)
	}
	sort.Strings(runDirs)
	c := &reports.Campaign{Schema: reports.CampaignSchema, Name: filepath.Base(filepath.Clean(dir)), Runs: 1}
	rows, cols := map[string]bool{}, map[string]bool{}
	seedSet := false
	for _, rd := range runDirs {
		info, err := ReadRunInfo(rd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rd, err)
		}
		res, err := result(rd, check)
		if err != nil {
			return nil, err
		}
		var params map[string]string
		var cfg struct {
			Options struct {
				Params   map[string]string `json:"params"`
				Topology string            `json:"topology"`
			} `json:"options"`
		}
		topology := ""
		if b, err := os.ReadFile(filepath.Join(rd, "config.json")); err == nil && json.Unmarshal(b, &cfg) == nil {
			params, topology = cfg.Options.Params, cfg.Options.Topology
		}
		col := strings.Join(info.Nemeses, "+")
		rowTopology, note := topology, ""
		if s, ok := locks.Lookup(info.Lock); ok && topology != "" {
			// A run on the topology a campaign picks for this fault
			// (AutoTopology) belongs to the scheme's own row.
			if t, why := AutoTopology(s, col); t == topology {
				rowTopology, note = "", fmt.Sprintf("runs on %s: %s", t, why)
			}
		}
		row := RowName(info.Lock, rowTopology, info.Fence, info.Wait, params)
		if !rows[row] {
			rows[row] = true
			c.Rows = append(c.Rows, row)
		}
		cols[col] = true
		id := row + "/" + col
		cell := c.Cell(id)
		if cell == nil {
			c.Cells = append(c.Cells, reports.Cell{
				ID: id, Row: row, Column: col, Lock: info.Lock, Nemesis: strings.Join(info.Nemeses, ","),
				Topology: topology, Note: note, Fence: info.Fence, Wait: info.Wait, Params: params,
				TimeLimitNs: info.TimeLimitMs * 1e6, Clients: info.Clients, TTLNs: info.TTLMillis * 1e6,
				Status: reports.CellDone,
			})
			cell = &c.Cells[len(c.Cells)-1]
		}
		rel, err := filepath.Rel(dir, rd)
		if err != nil {
			return nil, err
		}
		run := reports.CellRun{Seed: info.Seed, Dir: filepath.ToSlash(rel), Servers: info.Servers, Version: info.Version}
		FillRun(&run, res)
		cell.Runs = append(cell.Runs, run)
		// Runs per cell: the finished ones (an interrupted run and the
		// run that replaced it are one).
		if n := cell.Finished(); n > c.Runs {
			c.Runs = n
		}
		if !seedSet || info.Seed < c.Seed { // the campaign's seed: the lowest
			seedSet = true
			c.Seed = info.Seed
		}
		if c.Version == "" {
			c.Version = info.Version
		}
		if c.Started == "" || info.StartedAt < c.Started {
			c.Started = info.StartedAt
		}
	}
	for col := range cols {
		c.Columns = append(c.Columns, col)
	}
	sort.Slice(c.Columns, func(a, b int) bool {
		ra, rb := columnRank(c.Columns[a]), columnRank(c.Columns[b])
		if ra != rb {
			return ra < rb
		}
		return c.Columns[a] < c.Columns[b]
	})
	for i := range c.Cells {
		c.Cells[i].Summarize()
	}
	return c, nil
}

// isShrinkDir reports whether dir is a shrink's directory (locktest
// shrink, campaign --shrink: it holds shrink.json): the runs below it are
// the shrink's candidates, not runs of the store.
func isShrinkDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, shrink.ReportFile))
	return err == nil
}
