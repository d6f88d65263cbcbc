package reports

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CampaignSchema names the format of a campaign's results.json
// (Campaign). It changes when a field changes meaning or goes away.
const CampaignSchema = "locktest-campaign/1"

// Cell statuses.
const (
	CellPending = "pending" // not run yet (or interrupted before it finished)
	CellDone    = "done"    // every run of the cell finished
	CellNA      = "n/a"     // the fault does not apply to the scheme's topology
	CellSkipped = "skipped" // the fault applies but this machine cannot inject it (no root, no libfaketime, no server)
	CellError   = "error"   // a run failed with a harness error
)

// Cell outcomes against the expectation.
const (
	AsExpected    = "as-expected"
	Differs       = "differs"
	NoExpectation = "no-expectation"
	NotRun        = "not-run"
)

// VerdictInterrupted is the verdict of a CellRun (and of a cell whose runs
// are all interrupted) that was interrupted before its time limit: it
// proves nothing, and a finished run of the same seed supersedes it.
const VerdictInterrupted = "interrupted"

// Expectations a cell may have.
const (
	ExpectSafe   = "safe"
	ExpectUnsafe = "unsafe"
	ExpectEither = "either"
)

// Campaign is what a campaign directory's campaign.json and results.json
// hold: the plan, every cell's runs and verdict, and how it compared with
// its expectation. It is written after every finished run, so an
// interrupted campaign keeps what it finished and can be resumed. Times are
// nanoseconds; run directories are relative to the campaign directory.
type Campaign struct {
	Schema   string `json:"schema"`  // CampaignSchema
	Version  string `json:"version"` // locktest version that ran it
	Name     string `json:"name"`
	Config   string `json:"config,omitempty"` // the --config file, if any
	Command  string `json:"command,omitempty"`
	Started  string `json:"started"`            // wall clock, RFC 3339
	Finished string `json:"finished,omitempty"` // empty while running or when interrupted
	Seed     int64  `json:"seed"`               // seed of every cell's first run
	// Cluster is the backend every run started its servers on: "local" or
	// "docker" ("" in campaigns from before it was recorded: local).
	Cluster string `json:"cluster,omitempty"`
	Runs    int    `json:"runs"` // runs per cell (seeds Seed, Seed+1, ...)
	// Rows and Columns order the matrix: lock variants and nemeses.
	Rows    []string `json:"rows"`
	Columns []string `json:"columns"`
	Cells   []Cell   `json:"cells"`
	// WallNs is the campaign's wall time so far; StartupNs the part of it
	// spent starting clusters (summed over runs).
	WallNs      int64 `json:"wall_ns"`
	StartupNs   int64 `json:"startup_ns"`
	Interrupted bool  `json:"interrupted,omitempty"`
	// WorkloadNs is the time the runs' workloads ran (summed over runs);
	// ClusterStarts counts the clusters the runs started, ClusterReuses the
	// runs that ran on a cluster an earlier run had started (starts saved).
	WorkloadNs    int64 `json:"workload_ns"`
	ClusterStarts int   `json:"cluster_starts"`
	ClusterReuses int   `json:"cluster_reuses"`
	// StopEarly: every run stops at the first violation the online
	// checker is certain of (harness.Options.StopEarly; not in fenced
	// runs), so an unsafe cell's counts are lower bounds. nil (campaigns
	// from before it was recorded) means true; see StopsEarly.
	StopEarly *bool `json:"stop_early,omitempty"`
	// Parallel is how many runs ran at once (--parallel) in the last
	// session; StartupNs and WorkloadNs are summed over them, so with
	// Parallel > 1 they can exceed WallNs.
	Parallel int `json:"parallel,omitempty"`
}

// Share says how much of the wall time ns (a sum over runs, as StartupNs
// and WorkloadNs) is: a percentage, or, when runs ran side by side (or the
// sum exceeds the wall time), that it is summed over parallel slots; "-"
// before any wall time.
func (c *Campaign) Share(ns int64) string {
	switch {
	case c.Parallel > 1:
		return fmt.Sprintf("summed over %d parallel slots", c.Parallel)
	case c.WallNs <= 0:
		return "-"
	case ns > c.WallNs:
		return "summed over runs side by side"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(ns)/float64(c.WallNs))
}

// StopsEarly says whether the campaign's runs stop at their first certain
// violation (the default).
func (c *Campaign) StopsEarly() bool { return c.StopEarly == nil || *c.StopEarly }

// Cell is one scheme (with its variant: fencing, blocking acquire,
// topology, parameters) under one fault combination.
type Cell struct {
	ID       string `json:"id"`  // Row + "/" + Column
	Row      string `json:"row"` // e.g. "redis-lua +fence"
	Column   string `json:"column"`
	Lock     string `json:"lock"`
	Nemesis  string `json:"nemesis"` // comma separated
	Topology string `json:"topology,omitempty"`
	// Note says why the cell runs on another topology than its row's
	// ("runs on mysql-replicated: topology mysql has no primary with a
	// replica to fail over").
	Note string `json:"note,omitempty"`
	// Sizing says why the cell's TTL, holds and run length are not the
	// campaign's: its fault needs more to matter (harness.FaultSizing).
	Sizing        string            `json:"sizing,omitempty"`
	Fence         bool              `json:"fence,omitempty"`
	Wait          bool              `json:"wait,omitempty"`
	Params        map[string]string `json:"params,omitempty"`
	TimeLimitNs   int64             `json:"time_limit_ns"`
	Clients       int               `json:"clients"`
	TTLNs         int64             `json:"ttl_ns"`
	Hold          string            `json:"hold"`  // MIN..MAX, e.g. "50ms..250ms"
	Think         string            `json:"think"` // MIN..MAX
	OpTimeoutNs   int64             `json:"op_timeout_ns"`
	WaitTimeoutNs int64             `json:"wait_timeout_ns"`
	Expect        string            `json:"expect,omitempty"` // safe | unsafe | either | "" (none)
	Status        string            `json:"status"`           // pending | done | n/a | skipped | error
	Reason        string            `json:"reason,omitempty"` // why n/a, skipped or error
	// Verdict over the cell's runs: unsafe if any run was unsafe, safe if
	// every run was safe, inconclusive otherwise; empty until done.
	Verdict string `json:"verdict,omitempty"`
	Outcome string `json:"outcome"` // as-expected | differs | no-expectation | not-run
	// Anomalies counts the violations of every run by kind; Contained the
	// violations fencing tokens stopped.
	Anomalies map[string]int `json:"anomalies,omitempty"`
	Contained map[string]int `json:"contained,omitempty"`
	// Causes counts the violations and contained anomalies of every run
	// that carry a cause (checker.Anomaly.Cause: the double holders of
	// lease runs), by cause: "lease-expired", "lease-broken", "unknown".
	Causes map[string]int `json:"causes,omitempty"`
	// FirstViolationNs is the earliest violation of any run, since its
	// run's start; -1 when none.
	FirstViolationNs int64 `json:"first_violation_ns"`
	// Held is the mean share of the run during which a client surely held
	// the lock: how available the lock was for useful work.
	Held float64 `json:"held"`
	// StoppedEarly: some run of the cell stopped at its first certain
	// violation (CellRun.StoppedEarly): its anomaly counts are lower
	// bounds ("at least"), and its availability covers the time it ran.
	StoppedEarly bool      `json:"stopped_early,omitempty"`
	Runs         []CellRun `json:"runs"`
}

// CellRun is one run of a cell.
type CellRun struct {
	Seed             int64          `json:"seed"`
	Dir              string         `json:"dir,omitempty"` // relative to the campaign directory
	Verdict          string         `json:"verdict"`       // safe | unsafe | inconclusive | error | interrupted
	Why              string         `json:"why,omitempty"`
	Error            string         `json:"error,omitempty"`
	Anomalies        map[string]int `json:"anomalies,omitempty"`
	Contained        map[string]int `json:"contained,omitempty"`
	Causes           map[string]int `json:"causes,omitempty"` // as Cell.Causes
	FirstViolationNs int64          `json:"first_violation_ns"`
	Held             float64        `json:"held"`
	AcquiresOK       int            `json:"acquires_ok"`
	Acquires         int            `json:"acquires"`
	Faults           int            `json:"faults"`
	DurationNs       int64          `json:"duration_ns"`
	StartupNs        int64          `json:"startup_ns"` // cluster start-up, 0 on a reused cluster
	WallNs           int64          `json:"wall_ns"`    // the whole run, start-up and check included
	// DetectedNs is when the online checker was certain of the first
	// violation (run time), -1 or absent when it saw none; StoppedEarly:
	// the run ended there.
	DetectedNs   int64    `json:"detected_ns,omitempty"`
	StoppedEarly bool     `json:"stopped_early,omitempty"`
	Servers      []string `json:"servers,omitempty"`
	Version      string   `json:"version,omitempty"`
	// Cluster is the pooled cluster the run used (relative to the campaign
	// directory), Reused whether an earlier run had started it.
	Cluster string `json:"cluster,omitempty"`
	Reused  bool   `json:"reused,omitempty"`
	// Interrupted: the run was interrupted (Ctrl-C) before its time limit.
	// Its Verdict is "interrupted" (Why keeps what the check of its
	// recorded part said); it counts in no verdict, and a finished run of
	// the same seed supersedes it (Superseded).
	Interrupted bool `json:"interrupted,omitempty"`
}

// Superseded reports whether run i of the cell is an interrupted run that a
// finished run of the same seed supersedes: aggregations ignore it (it is
// kept on record).
func (cell *Cell) Superseded(i int) bool {
	r := &cell.Runs[i]
	if !r.Interrupted {
		return false
	}
	for k := range cell.Runs {
		if k != i && cell.Runs[k].Seed == r.Seed && !cell.Runs[k].Interrupted {
			return true
		}
	}
	return false
}

// Finished counts the runs of the cell that ran their course (not
// interrupted).
func (cell *Cell) Finished() int {
	n := 0
	for _, r := range cell.Runs {
		if !r.Interrupted {
			n++
		}
	}
	return n
}

// KindsText lists the cell's violations by kind and count, most first:
// "8 double-holder, 1 lost-update".
func (cell *Cell) KindsText() string { return kinds(cell.Anomalies) }

// Differs counts the cells whose outcome differs from their expectation.
func (c *Campaign) Differs() int {
	n := 0
	for _, cell := range c.Cells {
		if cell.Outcome == Differs {
			n++
		}
	}
	return n
}

// Cell returns the cell with id, or nil.
func (c *Campaign) Cell(id string) *Cell {
	for i := range c.Cells {
		if c.Cells[i].ID == id {
			return &c.Cells[i]
		}
	}
	return nil
}

// Servers lists every distinct server version the campaign's runs used.
func (c *Campaign) Servers() []string {
	seen := map[string]bool{}
	var out []string
	for _, cell := range c.Cells {
		for _, r := range cell.Runs {
			for _, s := range r.Servers {
				if !seen[s] {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Summarize recomputes a cell's verdict, anomaly counts, first violation,
// availability and outcome from its runs and its status.
//
// Interrupted runs count in nothing: one that a finished run of the same
// seed supersedes is ignored, and the others make the cell "interrupted"
// (unless a finished run proved it unsafe or failed), also while it is
// pending, never a verdict.
func (cell *Cell) Summarize() {
	cell.Anomalies, cell.Contained, cell.Causes = nil, nil, nil
	cell.FirstViolationNs, cell.Held, cell.Verdict, cell.StoppedEarly = -1, 0, "", false
	interrupted := 0
	for i, r := range cell.Runs {
		if r.Interrupted && !cell.Superseded(i) {
			interrupted++
		}
	}
	if cell.Status == CellPending && interrupted > 0 {
		cell.Verdict = VerdictInterrupted
	}
	if cell.Status == CellDone || cell.Status == CellError {
		safe, unsafe, errs, n := 0, 0, 0, 0
		for _, r := range cell.Runs {
			if r.Interrupted {
				continue
			}
			switch r.Verdict {
			case "safe":
				safe++
			case "unsafe":
				unsafe++
			case "error":
				errs++
			}
			cell.StoppedEarly = cell.StoppedEarly || r.StoppedEarly
			cell.Anomalies = addCounts(cell.Anomalies, r.Anomalies)
			cell.Contained = addCounts(cell.Contained, r.Contained)
			cell.Causes = addCounts(cell.Causes, r.Causes)
			if r.FirstViolationNs >= 0 && r.Verdict == "unsafe" && (cell.FirstViolationNs < 0 || r.FirstViolationNs < cell.FirstViolationNs) {
				cell.FirstViolationNs = r.FirstViolationNs
			}
			if r.Verdict != "error" {
				cell.Held += r.Held
				n++
			}
		}
		if n > 0 {
			cell.Held /= float64(n)
		}
		switch {
		case errs > 0:
			cell.Verdict = "error"
		case unsafe > 0:
			cell.Verdict = "unsafe"
		case interrupted > 0:
			cell.Verdict = VerdictInterrupted
		case safe == n && safe > 0:
			cell.Verdict = "safe"
		case n > 0:
			cell.Verdict = "inconclusive"
		}
	}
	cell.Outcome = cellOutcome(cell)
}

func cellOutcome(cell *Cell) string {
	switch cell.Status {
	case CellNA:
		return NotRun
	case CellPending:
		return NotRun
	}
	if cell.Verdict == VerdictInterrupted {
		// Interrupted runs prove nothing either way.
		return NotRun
	}
	switch cell.Status {
	case CellSkipped, CellError:
		// A cell with an expectation that could not be run is a change
		// the nightly job must see (a missing server, no root).
		if cell.Expect != "" {
			return Differs
		}
		return NotRun
	}
	switch cell.Expect {
	case "":
		return NoExpectation
	case ExpectEither:
		if cell.Verdict == "safe" || cell.Verdict == "unsafe" {
			return AsExpected
		}
		return Differs
	default:
		if cell.Verdict == cell.Expect {
			return AsExpected
		}
		return Differs
	}
}

func addCounts(dst, src map[string]int) map[string]int {
	for k, v := range src {
		if dst == nil {
			dst = map[string]int{}
		}
		dst[k] += v
	}
	return dst
}

// ReadCampaign reads a campaign.json or results.json.
func ReadCampaign(path string) (*Campaign, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Campaign
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("read campaign %s: %w", path, err)
	}
	if c.Schema != CampaignSchema {
		return nil, fmt.Errorf("read campaign %s: schema %q, want %q", path, c.Schema, CampaignSchema)
	}
	return &c, nil
}

// WriteCampaignJSON writes c to path atomically (a temporary file renamed
// over it).
func WriteCampaignJSON(path string, c *Campaign) error {
	for i := range c.Cells { // [] rather than null
		if c.Cells[i].Runs == nil {
			c.Cells[i].Runs = []CellRun{}
		}
	}
	if c.Rows == nil {
		c.Rows = []string{}
	}
	if c.Columns == nil {
		c.Columns = []string{}
	}
	if c.Cells == nil {
		c.Cells = []Cell{}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode campaign: %w", err)
	}
	return writeAtomic(path, append(b, '\n'))
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	tmp := f.Name()
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// kinds lists counts as "3 double-holder, 1 lost-update", most first.
func kinds(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var s []kv
	for k, v := range m {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].v != s[j].v {
			return s[i].v > s[j].v
		}
		return s[i].k < s[j].k
	})
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = fmt.Sprintf("%d %s", e.v, e.k)
	}
	return strings.Join(parts, ", ")
}
