package shrink

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/locktest/locktest/checker"
)

// Schema is the schema of shrink.json.
const Schema = "locktest-shrink/1"

// Files of a shrink directory.
const (
	ReportFile   = "shrink.json"
	ReproFile    = "repro.sh"
	ReproSched   = "repro-schedule.json"
	PageFile     = "shrink.html"
	MinimalLink  = "minimal" // the minimal run's directory (a symbolic link)
	RunsDir      = "runs"    // every candidate's runs
	ClustersDir  = "clusters"
	SchedulesDir = "schedules" // the schedule each candidate replays
)

// Step is a stage of shrinking, in the order they run.
type Step string

// The steps.
const (
	StepBaseline  Step = "stop-early" // cut everything after the first violation
	StepFaults    Step = "faults"     // ddmin over the schedule's faults
	StepNemeses   Step = "nemeses"    // ddmin over the --nemesis names
	StepClients   Step = "clients"
	StepTimeLimit Step = "time-limit"
	StepLengths   Step = "fault-lengths"
	StepParams    Step = "params"
	StepConfirm   Step = "confirm" // the reproduction rate of the result
)

// Outcome is what a candidate came to.
type Outcome string

// Candidate outcomes.
const (
	Reproduced    Outcome = "reproduced"
	NotReproduced Outcome = "not-reproduced"
	Invalid       Outcome = "invalid"     // the harness refused it or failed (see the try's error)
	Cut           Outcome = "cut"         // the budget ran out during it: it proves nothing
	Interrupted   Outcome = "interrupted" // Ctrl-C during it: it proves nothing
)

// Why shrinking stopped (Report.Stopped).
const (
	StoppedDone          = "done"
	StoppedBudget        = "budget"
	StoppedInterrupted   = "interrupted"
	StoppedNotReproduced = "not-reproduced" // the original never failed again
	StoppedError         = "error"          // the harness could not run the original again (Report.Error)
)

// Try is one run of a candidate.
type Try struct {
	Dir     string          `json:"dir,omitempty"`
	Verdict checker.Verdict `json:"verdict,omitempty"`
	// Reproduced: the run broke the property shrunk for.
	Reproduced bool `json:"reproduced"`
	// Found are the violations the run found, as "kind (cause)".
	Found []string `json:"found,omitempty"`
	// FirstViolationNs is when the run first broke the property (since
	// its start), -1 when it did not; AfterFaultNs how long after the
	// start of the last fault before it (Fault), -1 when no fault came
	// before it.
	FirstViolationNs int64  `json:"first_violation_ns"`
	AfterFaultNs     int64  `json:"after_fault_ns"`
	Fault            string `json:"fault,omitempty"`
	DurationNs       int64  `json:"duration_ns"`
	WallNs           int64  `json:"wall_ns"` // the whole run: start-up, workload, check
	Interrupted      bool   `json:"interrupted,omitempty"`
	Error            string `json:"error,omitempty"`
}

// Candidate is one configuration tried, with every run of it.
type Candidate struct {
	N       int     `json:"n"`
	Step    Step    `json:"step"`
	Change  string  `json:"change"` // in words: "clients 5 -> 2"
	Config  Config  `json:"config"`
	Tries   []Try   `json:"tries"`
	Outcome Outcome `json:"outcome"`
	// Kept: the candidate reproduced and became the best so far.
	Kept bool `json:"kept"`
}

// Rate is how often a configuration reproduced the property.
type Rate struct {
	Tries      int `json:"tries"`
	Reproduced int `json:"reproduced"`
	// MedianAfterFaultNs is the median time from the last fault's start
	// to the violation over the reproductions (-1 when none had a fault
	// before it); MedianFirstViolationNs from the run's start.
	MedianAfterFaultNs     int64 `json:"median_after_fault_ns"`
	MedianFirstViolationNs int64 `json:"median_first_violation_ns"`
}

// String says the rate in words: "5 of 5 tries, first violation 1.1 s
// after the fault (median)".
func (r Rate) String() string {
	s := fmt.Sprintf("%d of %d tries", r.Reproduced, r.Tries)
	switch {
	case r.Reproduced == 0:
	case r.MedianAfterFaultNs == 0: // begun within the anomaly's window (AfterFaultNs)
		s += ", first violation while the fault was on (median)"
	case r.MedianAfterFaultNs > 0:
		s += fmt.Sprintf(", first violation %.1f s after the fault (median)", time.Duration(r.MedianAfterFaultNs).Seconds())
	default:
		s += fmt.Sprintf(", first violation %.1f s into the run (median), with no fault before it", time.Duration(r.MedianFirstViolationNs).Seconds())
	}
	return s
}

// RateOf is the rate over tries (interrupted and failed tries not counted).
func RateOf(tries []Try) Rate {
	r := Rate{MedianAfterFaultNs: -1, MedianFirstViolationNs: -1}
	var after, first []int64
	for _, t := range tries {
		if t.Interrupted || t.Error != "" {
			continue
		}
		r.Tries++
		if !t.Reproduced {
			continue
		}
		r.Reproduced++
		first = append(first, t.FirstViolationNs)
		if t.AfterFaultNs >= 0 {
			after = append(after, t.AfterFaultNs)
		}
	}
	if len(first) > 0 {
		r.MedianFirstViolationNs = median(first)
	}
	if len(after) > 0 && len(after)*2 >= len(first) {
		r.MedianAfterFaultNs = median(after)
	}
	return r
}

func median(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Report is shrink.json: what was shrunk, for which property, every
// candidate tried with its outcome, the smallest configuration found and
// how often it fails, and where shrinking stopped.
type Report struct {
	Schema string `json:"schema"`
	Source string `json:"source"` // the run directory shrunk
	// Seed is the --seed of the original and of every candidate's runs.
	Seed     int64    `json:"seed"`
	Property Property `json:"property"`
	// Explanation is the checker's plain words on the original's first
	// violation.
	Explanation string `json:"explanation"`
	Original    Config `json:"original"`
	Minimal     Config `json:"minimal"`
	// MinimalDir is a run of the minimal configuration that reproduced
	// (relative to the shrink directory), "" if none did.
	MinimalDir string `json:"minimal_dir,omitempty"`
	Rate       Rate   `json:"rate"`
	Command    string `json:"command"` // the repro.sh line
	// Replay: the candidates replayed schedules (--schedule); false when
	// the faults were drawn by the seed (no schedule.json, or none that
	// this build can replay), with Note saying which.
	Replay     bool        `json:"replay"`
	Note       string      `json:"note,omitempty"`
	Candidates []Candidate `json:"candidates"`
	Stopped    string      `json:"stopped"`         // done | budget | interrupted | not-reproduced | error
	StoppedAt  Step        `json:"stopped_at"`      // the step it was in
	Error      string      `json:"error,omitempty"` // a harness error that ended it
	BudgetNs   int64       `json:"budget_ns"`       // --budget
	ElapsedNs  int64       `json:"elapsed_ns"`      // time spent
	Runs       int         `json:"runs"`            // runs made, every try of every candidate
	Finished   bool        `json:"finished"`        // false while it runs
}

// Write writes the report to dir/shrink.json (atomically).
func (r *Report) Write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ReportFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ReportFile))
}

// LoadReport reads dir/shrink.json.
func LoadReport(dir string) (*Report, error) {
	var r Report
	if err := readJSON(filepath.Join(dir, ReportFile), &r); err != nil {
		return nil, err
	}
	return &r, nil
}
