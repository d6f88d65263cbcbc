package campaigns

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/workloads"
)

// Runner runs one run of a cell. harness.Run is the real one.
type Runner interface {
	Run(ctx context.Context, o harness.Options) (*harness.Outcome, error)
}

// HarnessRunner runs cells with harness.Run: real servers, one cluster
// started per run.
type HarnessRunner struct{}

// Run calls harness.Run.
func (HarnessRunner) Run(ctx context.Context, o harness.Options) (*harness.Outcome, error) {
	return harness.Run(ctx, o)
}

// Files in a campaign directory.
const (
	StateFile   = "campaign.json" // the state, rewritten after every run
	ResultsFile = "results.json"  // the same, written when the campaign ends
	IndexFile   = "index.html"
	JUnitFile   = "junit.xml"
	SummaryFile = "summary.md"
	RunsDir     = "runs"     // the runs' store
	ClustersDir = "clusters" // the pooled clusters (harness.Pool)
)

// Options say how to run a campaign.
type Options struct {
	Dir      string // campaign directory
	Runner   Runner
	Parallel int       // cells run at once (default 1)
	Out      io.Writer // progress
	Live     bool      // redraw a status line (a terminal) instead of plain lines
	Command  string
	// NoReuse starts a cluster for every run; by default runs whose servers
	// are started alike share one (harness.Pool), one run at a time.
	NoReuse bool
	// Shard, when set, is the share of a bigger campaign that c is
	// (SplitShard): Run runs the seeds of each cell it names, and writes
	// it to the directory's shard.json at the start and the end.
	Shard *Shard
}

// Run runs every pending cell of c (cells already done are kept: this is
// also how a campaign resumes), writing the state after every run and the
// reports at the end, also when ctx is cancelled (then c.Interrupted is
// set and the unfinished cells stay pending). Errors of single runs are
// recorded in their cells; Run returns an error only when it cannot keep
// the state.
func Run(ctx context.Context, c *reports.Campaign, o Options) error {
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, RunsDir), 0o755); err != nil {
		return fmt.Errorf("campaign directory: %w", err)
	}
	if c.Started == "" {
		c.Started = time.Now().UTC().Format(time.RFC3339)
	}
	if c.Version == "" {
		c.Version = harness.Version
	}
	if o.Command != "" && c.Command == "" {
		c.Command = o.Command
	}
	unlock, err := lockDir(o.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	c.Finished, c.Interrupted, c.Parallel = "", false, o.Parallel
	r := &runner{c: c, o: o, start: time.Now(), wall0: c.WallNs}
	// Jobs: every missing run of every pending or failed cell.
	for i := range c.Cells {
		cell := &c.Cells[i]
		if cell.Status == reports.CellError {
			cell.Status, cell.Reason, cell.Runs = reports.CellPending, "", nil
		}
		if cell.Status != reports.CellPending {
			continue
		}
		// An interrupted run proves nothing: its seed runs again (the
		// run stays on record, superseded).
		have := finishedSeeds(cell)
		for _, seed := range r.seeds(cell) {
			if !have[seed] {
				r.jobs = append(r.jobs, job{cell: i, seed: seed})
			}
		}
		if r.complete(cell) {
			cell.Status = reports.CellDone
			cell.Summarize()
		}
	}
	if !o.NoReuse {
		r.groupJobs()
		r.pool = harness.NewPool(filepath.Join(o.Dir, ClustersDir))
		// Also on Ctrl-C: the runs give their clusters back stopped, and
		// the idle ones stop here.
		defer r.pool.Close()
	}
	r.prog = newProgress(o.Out, o.Live, c, len(r.jobs))
	if err := r.save(); err != nil {
		return err
	}
	if o.Shard != nil {
		o.Shard.record(c)
		if err := WriteShard(o.Dir, o.Shard); err != nil {
			return err
		}
	}
	r.prog.begin()
	jobs := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < o.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r.do(ctx, j)
			}
		}()
	}
feed:
	for _, j := range r.jobs {
		select {
		case jobs <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	r.prog.end()
	r.mu.Lock()
	defer r.mu.Unlock()
	c.Interrupted = ctx.Err() != nil
	if !c.Interrupted {
		c.Finished = time.Now().UTC().Format(time.RFC3339)
	}
	r.tick()
	if r.saveErr != nil {
		return r.saveErr
	}
	if o.Shard != nil {
		o.Shard.record(c)
		if err := WriteShard(o.Dir, o.Shard); err != nil {
			return err
		}
	}
	return WriteReports(o.Dir, c)
}

// seeds are the seeds of cell's runs: Seed, Seed+1, ... for Runs runs, or
// those of the cell in the shard.
func (r *runner) seeds(cell *reports.Cell) []int64 {
	if r.o.Shard != nil {
		return r.o.Shard.seeds(cell.ID)
	}
	out := make([]int64, r.c.Runs)
	for k := range out {
		out[k] = r.c.Seed + int64(k)
	}
	return out
}

// finishedSeeds are the seeds of the runs of cell that ran their course.
func finishedSeeds(cell *reports.Cell) map[int64]bool {
	done := map[int64]bool{}
	for _, run := range cell.Runs {
		if !run.Interrupted {
			done[run.Seed] = true
		}
	}
	return done
}

// complete says whether every run of cell finished.
func (r *runner) complete(cell *reports.Cell) bool {
	done := finishedSeeds(cell)
	for _, s := range r.seeds(cell) {
		if !done[s] {
			return false
		}
	}
	return true
}

type job struct {
	cell int
	seed int64
	key  string // harness.PoolKey of its run: "" starts its own cluster
}

// groupJobs orders the jobs so that those whose runs can share a cluster
// (same harness.PoolKey) run back to back, each group where its first job
// was; the cells keep their order in the matrix and the results.
func (r *runner) groupJobs() {
	first := map[string]int{}
	r.left = map[string]int{}
	for i := range r.jobs {
		j := &r.jobs[i]
		if o, err := Options2Harness(&r.c.Cells[j.cell], j.seed, ""); err == nil {
			j.key = harness.PoolKey(o)
		}
		if _, ok := first[j.key]; !ok || j.key == "" {
			first[j.key] = i
		}
		r.left[j.key]++
	}
	rank := func(j job) int {
		if j.key == "" {
			return -1
		}
		return first[j.key]
	}
	order := make([]int, len(r.jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := rank(r.jobs[order[a]]), rank(r.jobs[order[b]])
		if ra < 0 {
			ra = order[a]
		}
		if rb < 0 {
			rb = order[b]
		}
		return ra < rb
	})
	jobs := make([]job, len(r.jobs))
	for i, k := range order {
		jobs[i] = r.jobs[k]
	}
	r.jobs = jobs
}

type runner struct {
	c       *reports.Campaign
	o       Options
	jobs    []job
	prog    *progress
	start   time.Time
	wall0   int64
	mu      sync.Mutex
	saveErr error

	slotMu    sync.Mutex
	lastStart int64 // unix second of the last run started

	pool *harness.Pool  // nil: every run starts its own cluster
	left map[string]int // jobs not finished per pool key
}

// startSlot waits until no other run of this campaign has started in the
// current wall-clock second. harness.Run names a run "lt" + HHMMSS + pid,
// so two runs that one process starts in the same second would share
// their run id, and with it their record for `locktest cleanup`.
func (r *runner) startSlot(ctx context.Context) {
	r.slotMu.Lock()
	defer r.slotMu.Unlock()
	for {
		now := time.Now()
		if now.Unix() != r.lastStart {
			r.lastStart = now.Unix()
			return
		}
		next := time.Unix(now.Unix()+1, 0).Add(5 * time.Millisecond)
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
			return
		}
	}
}

// do runs one job and records it.
func (r *runner) do(ctx context.Context, j job) {
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	cell := r.c.Cells[j.cell] // a copy: the options
	r.mu.Unlock()
	if r.o.Parallel > 1 {
		r.startSlot(ctx)
	}
	r.prog.started(&cell, j.seed)
	opts, err := Options2Harness(&cell, j.seed, filepath.Join(r.o.Dir, RunsDir))
	if r.c.Cluster != "" {
		opts.Cluster = r.c.Cluster
	}
	opts.Pool = r.pool
	opts.StopEarly = r.c.StopsEarly()
	defer r.finishKey(j.key)
	t0 := time.Now()
	var out *harness.Outcome
	if err == nil {
		out, err = r.o.Runner.Run(ctx, opts)
	}
	wall := time.Since(t0)
	r.mu.Lock()
	defer r.mu.Unlock()
	if out == nil && ctx.Err() != nil {
		// Interrupted before the run recorded anything (or it failed
		// because of the interrupt): the cell stays pending and a resume
		// runs it.
		r.prog.finished(&r.c.Cells[j.cell], j.seed, nil)
		return
	}
	interrupted := out != nil && out.Interrupted
	run := reports.CellRun{Seed: j.seed, WallNs: int64(wall), FirstViolationNs: -1}
	if out != nil {
		run.StartupNs = int64(out.Startup)
		if d := out.Detected; d != nil {
			run.DetectedNs, run.StoppedEarly = int64(d.CertainAt), d.Stopped
		}
		if out.Cluster != "" {
			if rel, rerr := filepath.Rel(r.o.Dir, out.Cluster); rerr == nil {
				run.Cluster = filepath.ToSlash(rel)
			}
			run.Reused = out.Reused
		}
		if out.Dir != "" {
			if rel, rerr := filepath.Rel(r.o.Dir, out.Dir); rerr == nil {
				run.Dir = filepath.ToSlash(rel)
			}
		}
	}
	if err != nil && ctx.Err() != nil {
		// A run that failed because of the interrupt proves nothing
		// either: the cell stays pending.
		interrupted, err = true, nil
	}
	if err != nil {
		run.Verdict, run.Error = "error", err.Error()
	} else {
		FillRun(&run, &out.Result)
		if interrupted {
			// harness.Run's history says so too (its results.json has
			// "interrupted": true); a run cut by the campaign's own
			// cancellation before it wrote its history is marked here.
			markInterrupted(&run)
		}
		if info, ierr := ReadRunInfo(out.Dir); ierr == nil {
			run.Servers, run.Version = info.Servers, info.Version
		}
	}
	cellp := &r.c.Cells[j.cell]
	if interrupted && run.Dir == "" {
		// Nothing on disk to keep a record of.
		r.prog.finished(cellp, j.seed, nil)
		return
	}
	cellp.Runs = append(cellp.Runs, run)
	// By seed; an interrupted run stays before the run that replaced it.
	sort.SliceStable(cellp.Runs, func(a, b int) bool { return cellp.Runs[a].Seed < cellp.Runs[b].Seed })
	if err != nil {
		cellp.Status, cellp.Reason = reports.CellError, err.Error()
	} else if r.complete(cellp) && cellp.Status == reports.CellPending {
		cellp.Status = reports.CellDone
	}
	r.c.StartupNs += run.StartupNs
	r.c.WorkloadNs += run.DurationNs
	if run.Reused {
		r.c.ClusterReuses++
	} else if run.StartupNs > 0 {
		r.c.ClusterStarts++
	}
	cellp.Summarize()
	r.prog.finished(cellp, j.seed, &run)
	r.tick()
	if err := r.save(); err != nil && r.saveErr == nil {
		r.saveErr = err
	}
}

// finishKey counts a job of pool key as done: once no job of the key is
// left, its idle clusters stop.
func (r *runner) finishKey(key string) {
	if r.pool == nil {
		return
	}
	r.mu.Lock()
	r.left[key]--
	done := r.left[key] == 0
	r.mu.Unlock()
	if done && key != "" {
		r.pool.Drop(key)
	}
}

func (r *runner) tick() { r.c.WallNs = r.wall0 + int64(time.Since(r.start)) }

func (r *runner) save() error {
	return reports.WriteCampaignJSON(filepath.Join(r.o.Dir, StateFile), r.c)
}

// lockDir takes the campaign directory for this process: two campaigns
// writing one campaign.json would lose each other's runs.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("campaign directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("campaign directory %s is in use by another locktest campaign", dir)
	}
	return func() { f.Close() }, nil
}

// Options2Harness turns a cell into the options of its run with seed.
func Options2Harness(cell *reports.Cell, seed int64, store string) (harness.Options, error) {
	o := harness.Options{
		Lock: cell.Lock, Nemesis: cell.Nemesis, TimeLimit: time.Duration(cell.TimeLimitNs), Clients: cell.Clients,
		TTL: time.Duration(cell.TTLNs), Seed: seed, Fence: cell.Fence, Wait: cell.Wait,
		WaitTimeout: time.Duration(cell.WaitTimeoutNs), OpTimeout: time.Duration(cell.OpTimeoutNs),
		Store: store, Cluster: ClusterLocal, Topology: cell.Topology, Quiet: true, Out: io.Discard,
		// A certain violation settles the cell's verdict: the rest of the
		// run would only repeat it. The campaign's stop_early (--stop-early)
		// decides (Run sets it from reports.Campaign.StopsEarly).
		StopEarly: true,
		Command:   fmt.Sprintf("locktest campaign cell %s seed %d", cell.ID, seed),
	}
	if len(cell.Params) > 0 {
		// A campaign's params are shared by cells of many schemes and
		// faults: each run gets those it reads, and the unknown ones,
		// which its validation refuses.
		topology := cell.Topology
		if s, ok := locks.Lookup(cell.Lock); ok && topology == "" {
			topology = s.Topology
		}
		nemeses := strings.Split(cell.Nemesis, ",")
		o.Params = map[string]string{}
		for k, v := range cell.Params {
			if known, applies, _ := matrix.KnownParam(k, cell.Lock, topology, nemeses); applies || !known {
				o.Params[k] = v
			}
		}
	}
	lo, hi, err := ParseRange(cell.Hold)
	if err != nil {
		return o, fmt.Errorf("hold: %w", err)
	}
	o.Hold = workloads.Range{Min: lo, Max: hi}
	if lo, hi, err = ParseRange(cell.Think); err != nil {
		return o, fmt.Errorf("think: %w", err)
	}
	o.Think = workloads.Range{Min: lo, Max: hi}
	return o, nil
}

// markInterrupted records run as interrupted: no verdict, the check of
// what it recorded kept in Why.
func markInterrupted(run *reports.CellRun) {
	if run.Interrupted {
		return
	}
	run.Interrupted = true
	if run.Verdict != "" && run.Verdict != reports.VerdictInterrupted {
		run.Why = "interrupted before its time limit; what it recorded checks as " + run.Verdict + ": " + run.Why
	}
	run.Verdict = reports.VerdictInterrupted
}

// FillRun copies what the matrix shows from a run's result. An
// interrupted run (res.Interrupted), or one whose check was stopped
// (res.CheckInterrupted), gets the verdict "interrupted".
func FillRun(run *reports.CellRun, res *checker.Result) {
	// A run recorded as interrupted stays so when it is checked again.
	was := run.Interrupted
	run.Interrupted = false
	run.Verdict, run.Why = string(res.Verdict), res.Why
	run.FirstViolationNs, run.Anomalies, run.Contained, run.Causes = -1, nil, nil, nil
	for _, a := range res.Anomalies {
		if a.Cause != "" && (a.Severity == checker.SeverityViolation || a.Severity == checker.SeverityContained) {
			if run.Causes == nil {
				run.Causes = map[string]int{}
			}
			run.Causes[string(a.Cause)]++
		}
		switch a.Severity {
		case checker.SeverityViolation:
			if run.Anomalies == nil {
				run.Anomalies = map[string]int{}
			}
			run.Anomalies[string(a.Kind)]++
		case checker.SeverityContained:
			if run.Contained == nil {
				run.Contained = map[string]int{}
			}
			run.Contained[string(a.Kind)]++
		}
	}
	if res.Verdict == checker.Unsafe {
		run.FirstViolationNs = res.FirstViolation
	}
	n := res.Counts
	run.AcquiresOK, run.Acquires, run.Faults, run.DurationNs = n.AcquiresOK, n.Acquires, n.Faults, n.DurationNs
	if n.DurationNs > 0 {
		run.Held = float64(n.HeldNs) / float64(n.DurationNs)
	}
	run.StoppedEarly = run.StoppedEarly || res.StoppedEarly
	// A check stopped before it decided everything (CheckInterrupted)
	// proves as little as a cut workload: no verdict, run again on resume.
	if res.Interrupted || res.CheckInterrupted || was {
		markInterrupted(run)
	}
}

// ReadRunInfo reads the header (first line) of a run's history.
func ReadRunInfo(dir string) (*history.RunInfo, error) {
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		return nil, errors.Join(history.ErrNoHeader, sc.Err())
	}
	var e history.Event
	if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
		return nil, err
	}
	if e.Type != history.Run || e.Info == nil {
		return nil, history.ErrNoHeader
	}
	return e.Info, nil
}

// WriteReports writes results.json, index.html, junit.xml and summary.md
// into the campaign directory.
func WriteReports(dir string, c *reports.Campaign) error {
	if err := reports.WriteCampaignJSON(filepath.Join(dir, StateFile), c); err != nil {
		return err
	}
	if err := reports.WriteCampaignJSON(filepath.Join(dir, ResultsFile), c); err != nil {
		return err
	}
	write := func(name string, f func(io.Writer) error) error {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			fh.Close()
			return err
		}
		return fh.Close()
	}
	if err := write(IndexFile, func(w io.Writer) error { return reports.WriteCampaignHTML(w, c) }); err != nil {
		return err
	}
	if err := write(JUnitFile, func(w io.Writer) error { return reports.WriteCampaignJUnit(w, c) }); err != nil {
		return err
	}
	return write(SummaryFile, func(w io.Writer) error { return reports.WriteCampaignMarkdown(w, c, "") })
}

// Load reads the state of a campaign directory (to resume it).
func Load(dir string) (*reports.Campaign, error) {
	return reports.ReadCampaign(filepath.Join(dir, StateFile))
}
