package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/docker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/locks"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/shrink"
)

// fakeRunner answers every run with the verdict of its lock, without
// starting anything.
type fakeRunner struct{ verdicts map[string]checker.Verdict }

func (f fakeRunner) Run(_ context.Context, o harness.Options) (*harness.Outcome, error) {
	dir := filepath.Join(o.Store, o.Lock, o.Nemesis, "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	v := f.verdicts[o.Lock+"/"+o.Nemesis]
	res := checker.Result{Verdict: v, Lock: o.Lock, FirstViolation: -1}
	if v == checker.Unsafe {
		res.FirstViolation = int64(time.Second)
		res.Anomalies = []checker.Anomaly{{Kind: checker.KindDoubleHolder, Severity: checker.SeverityViolation}}
	}
	if v == "" {
		return nil, errors.New("fake harness error")
	}
	return &harness.Outcome{Dir: dir, Result: res, Startup: 10 * time.Millisecond}, nil
}

func runCampaignCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return runCampaignCmdContext(t, context.Background(), args...)
}

// runCampaignCmdContext is runCampaignCmd with ctx as its interrupt.
func runCampaignCmdContext(t *testing.T, ctx context.Context, args ...string) (int, string) {
	t.Helper()
	c := newCampaignCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.ExecuteContext(ctx)
	code := 0
	var ec exitCode
	if errors.As(err, &ec) {
		code = ec.code
	} else {
		require.NoError(t, err)
	}
	return code, out.String()
}

// writeThreeCells writes a campaign config of three cells, one expected
// safe, one unsafe, one either, and returns its path.
func writeThreeCells(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`name: t
defaults: {time_limit: 1s}
cells:
  - lock: redis-lua
    expect: {none: safe, pause: unsafe}
  - lock: redis-setnx
    expect: {crash-client: either}
`), 0o644))
	return cfg
}

// TestCampaignExitCodeFlips: the same config exits 0 while every cell
// matches its expectation and 1 as soon as one verdict contradicts it, in
// either direction; a harness error is 2.
func TestCampaignExitCodeFlips(t *testing.T) {
	cfg := writeThreeCells(t)
	base := map[string]checker.Verdict{"redis-lua/none": checker.Safe, "redis-lua/pause": checker.Unsafe, "redis-setnx/crash-client": checker.Unsafe}
	cases := []struct {
		name   string
		change map[string]checker.Verdict
		want   int
	}{
		{"as expected", nil, exitSafe},
		{"safe cell turns unsafe", map[string]checker.Verdict{"redis-lua/none": checker.Unsafe}, exitUnsafe},
		{"unsafe cell turns safe", map[string]checker.Verdict{"redis-lua/pause": checker.Safe}, exitUnsafe},
		{"expected unsafe turns inconclusive", map[string]checker.Verdict{"redis-lua/pause": checker.Inconclusive}, exitUnsafe},
		{"either accepts safe", map[string]checker.Verdict{"redis-setnx/crash-client": checker.Safe}, exitSafe},
		{"harness error", map[string]checker.Verdict{"redis-lua/none": ""}, exitError},
	}
	orig := campaignRunner
	t.Cleanup(func() { campaignRunner = orig })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]checker.Verdict{}
			for k, x := range base {
				v[k] = x
			}
			for k, x := range tc.change {
				v[k] = x
			}
			campaignRunner = fakeRunner{v}
			dir := filepath.Join(t.TempDir(), "camp")
			code, out := runCampaignCmd(t, "--config", cfg, "--dir", dir, "--quiet")
			require.Equal(t, tc.want, code, out)
			c, err := reports.ReadCampaign(filepath.Join(dir, campaigns.ResultsFile))
			require.NoError(t, err)
			require.Len(t, c.Cells, 3)
			md, err := os.ReadFile(filepath.Join(dir, campaigns.SummaryFile))
			require.NoError(t, err)
			junit, err := os.ReadFile(filepath.Join(dir, campaigns.JUnitFile))
			require.NoError(t, err)
			if tc.want == exitUnsafe {
				require.Contains(t, string(md), "differ from their expectation")
				require.Contains(t, string(junit), "<failure")
			} else if tc.want == exitSafe {
				require.Contains(t, string(md), "every cell as expected")
				require.NotContains(t, string(junit), "<failure")
			}
		})
	}
}

func TestCampaignUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--locks", "redis-lua"},
		{"--locks", "nope", "--nemeses", "none"},
		{"--locks", "redis-lua", "--nemeses", "none", "--config", "x.yaml"},
		{"--config", "/nonexistent.yaml"},
		{"--locks", "redis-lua", "--nemeses", "none", "--parallel", "0"},
	} {
		code, out := runCampaignCmd(t, append(args, "--dir", t.TempDir())...)
		require.Equal(t, exitError, code, "%v: %s", args, out)
	}
}

// TestCampaignResume: an interrupted campaign keeps its finished cells,
// and --resume runs only the rest.
func TestCampaignResume(t *testing.T) {
	orig := campaignRunner
	t.Cleanup(func() { campaignRunner = orig })
	dir := filepath.Join(t.TempDir(), "camp")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	campaignRunner = runnerFunc(func(c context.Context, o harness.Options) (*harness.Outcome, error) {
		n++
		if n == 2 {
			cancel() // Ctrl-C during the second run
			return &harness.Outcome{Interrupted: true}, nil
		}
		return fakeRunner{map[string]checker.Verdict{o.Lock + "/" + o.Nemesis: checker.Safe}}.Run(c, o)
	})
	c := newCampaignCmd()
	c.SetOut(&bytes.Buffer{})
	c.SetErr(&bytes.Buffer{})
	c.SetArgs([]string{"--locks", "redis-lua", "--nemeses", "none,pause,kill", "--dir", dir, "--quiet"})
	err := c.ExecuteContext(ctx)
	var ec exitCode
	require.ErrorAs(t, err, &ec)
	require.Equal(t, exitInterrupted, ec.code)
	st, err := campaigns.Load(dir)
	require.NoError(t, err)
	require.True(t, st.Interrupted)
	done := 0
	for _, cell := range st.Cells {
		if cell.Status == reports.CellDone {
			done++
		}
	}
	require.Equal(t, 1, done)

	var ran []string
	campaignRunner = runnerFunc(func(c context.Context, o harness.Options) (*harness.Outcome, error) {
		ran = append(ran, o.Nemesis)
		return fakeRunner{map[string]checker.Verdict{o.Lock + "/" + o.Nemesis: checker.Safe}}.Run(c, o)
	})
	code, out := runCampaignCmd(t, "--resume", dir, "--quiet")
	require.Equal(t, exitSafe, code, out)
	require.Equal(t, []string{"pause", "kill"}, ran)
	st, err = campaigns.Load(dir)
	require.NoError(t, err)
	require.False(t, st.Interrupted)
	require.True(t, strings.HasPrefix(st.Cells[0].ID, "redis-lua/"))
	for _, cell := range st.Cells {
		require.Equal(t, reports.CellDone, cell.Status, cell.ID)
	}
}

type runnerFunc func(context.Context, harness.Options) (*harness.Outcome, error)

func (f runnerFunc) Run(ctx context.Context, o harness.Options) (*harness.Outcome, error) {
	return f(ctx, o)
}

// TestCampaignParallel: cells run side by side record every run once, and
// no two runs start in the same second (they would share a run id).
func TestCampaignParallel(t *testing.T) {
	orig := campaignRunner
	t.Cleanup(func() { campaignRunner = orig })
	var mu sync.Mutex
	starts := map[int64]int{}
	campaignRunner = runnerFunc(func(c context.Context, o harness.Options) (*harness.Outcome, error) {
		mu.Lock()
		starts[time.Now().Unix()]++
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		return fakeRunner{map[string]checker.Verdict{o.Lock + "/" + o.Nemesis: checker.Safe}}.Run(c, o)
	})
	dir := filepath.Join(t.TempDir(), "camp")
	code, out := runCampaignCmd(t, "--locks", "redis-lua,redis-del", "--nemeses", "none,pause", "--parallel", "3", "--dir", dir, "--quiet")
	require.Equal(t, exitSafe, code, out)
	st, err := campaigns.Load(dir)
	require.NoError(t, err)
	for _, cell := range st.Cells {
		require.Equal(t, reports.CellDone, cell.Status, cell.ID)
		require.Len(t, cell.Runs, 1, cell.ID)
	}
	for sec, n := range starts {
		require.Equal(t, 1, n, "runs started in second %d", sec)
	}
}

// TestCampaignCluster: --cluster docker reaches every run, the cells
// whose topology the docker backend does not run are n/a (not failed), the
// reports say where the servers ran, and a resume keeps the backend.
func TestCampaignCluster(t *testing.T) {
	var in, out string // schemes on a topology docker runs, and on one it does not
	for _, name := range locks.Names() {
		s, _ := locks.Lookup(name)
		if in == "" && docker.Supports(s.Topology) {
			in = name
		}
		if out == "" && !docker.Supports(s.Topology) {
			out = name
		}
	}
	require.NotEmpty(t, in)
	lockList := in
	if out != "" {
		lockList += "," + out
	}
	origRunner, origProbe := campaignRunner, probeCampaign
	t.Cleanup(func() { campaignRunner, probeCampaign = origRunner, origProbe })
	probeCampaign = func(_ context.Context, cluster string) (campaigns.Environment, error) {
		return campaigns.Environment{Cluster: cluster}, nil // docker is here, with its image
	}
	var mu sync.Mutex
	backends := map[string]int{}
	campaignRunner = runnerFunc(func(c context.Context, o harness.Options) (*harness.Outcome, error) {
		mu.Lock()
		backends[o.Cluster]++
		mu.Unlock()
		return fakeRunner{map[string]checker.Verdict{o.Lock + "/" + o.Nemesis: checker.Safe}}.Run(c, o)
	})
	dir := filepath.Join(t.TempDir(), "camp")
	code, outText := runCampaignCmd(t, "--locks", lockList, "--nemeses", "none,pause", "--cluster", "docker", "--dir", dir, "--quiet")
	require.Equal(t, exitSafe, code, outText)
	require.Equal(t, map[string]int{"docker": 2}, backends)

	c, err := reports.ReadCampaign(filepath.Join(dir, campaigns.ResultsFile))
	require.NoError(t, err)
	require.Equal(t, "docker", c.Cluster)
	require.Equal(t, reports.CellDone, c.Cell(in+"/none").Status)
	if out != "" {
		cell := c.Cell(out + "/none")
		require.Equal(t, reports.CellNA, cell.Status)
		require.Contains(t, cell.Reason, "runs only on --cluster local")
		require.Equal(t, reports.NotRun, cell.Outcome)
	}
	index, err := os.ReadFile(filepath.Join(dir, campaigns.IndexFile))
	require.NoError(t, err)
	require.Contains(t, string(index), `<span class="k">cluster</span>docker`)
	md, err := os.ReadFile(filepath.Join(dir, campaigns.SummaryFile))
	require.NoError(t, err)
	require.Contains(t, string(md), "on --cluster docker")

	// A resume goes on with docker, and refuses another backend.
	code, outText = runCampaignCmd(t, "--resume", dir, "--cluster", "local", "--quiet")
	require.Equal(t, exitError, code, outText)
	require.Contains(t, outText, "the campaign runs on --cluster docker, not local")

	probeCampaign = origProbe
	code, outText = runCampaignCmd(t, "--locks", in, "--nemeses", "none", "--cluster", "compose", "--dir", t.TempDir(), "--quiet")
	require.Equal(t, exitError, code, outText)
	require.Contains(t, outText, "unknown cluster backend")
}

// TestCampaignStopEarly: every run stops at its first certain violation
// unless --stop-early=false or "stop_early: false" says otherwise (the
// flag wins over the file); results.json records it, a resume keeps it,
// and the matrix says plainly that a cut run's counts are lower bounds.
func TestCampaignStopEarly(t *testing.T) {
	orig := campaignRunner
	t.Cleanup(func() { campaignRunner = orig })
	var mu sync.Mutex
	var got []bool
	campaignRunner = runnerFunc(func(c context.Context, o harness.Options) (*harness.Outcome, error) {
		mu.Lock()
		got = append(got, o.StopEarly)
		mu.Unlock()
		out, err := fakeRunner{map[string]checker.Verdict{o.Lock + "/" + o.Nemesis: checker.Unsafe}}.Run(c, o)
		if err == nil && o.StopEarly {
			out.Result.StoppedEarly = true
		}
		return out, err
	})
	cfg := func(t *testing.T, extra string) string {
		p := filepath.Join(t.TempDir(), "c.yaml")
		require.NoError(t, os.WriteFile(p, []byte("name: t\n"+extra+"defaults: {time_limit: 1s}\ncells:\n  - lock: redis-lua\n    expect: {pause: unsafe}\n"), 0o644))
		return p
	}
	cases := []struct {
		name string
		args []string
		want bool
	}{
		{"lists: default", []string{"--locks", "redis-lua", "--nemeses", "pause"}, true},
		{"lists: flag off", []string{"--locks", "redis-lua", "--nemeses", "pause", "--stop-early=false"}, false},
		{"config: default", []string{"--config", cfg(t, "")}, true},
		{"config: file off", []string{"--config", cfg(t, "stop_early: false\n")}, false},
		{"config: flag wins", []string{"--config", cfg(t, "stop_early: false\n"), "--stop-early"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			dir := filepath.Join(t.TempDir(), "camp")
			code, out := runCampaignCmd(t, append(tc.args, "--dir", dir, "--quiet")...)
			require.Equal(t, exitSafe, code, out)
			require.Equal(t, []bool{tc.want}, got)
			c, err := reports.ReadCampaign(filepath.Join(dir, campaigns.ResultsFile))
			require.NoError(t, err)
			require.Equal(t, tc.want, c.StopsEarly())
			cell := c.Cell("redis-lua/pause")
			require.Equal(t, tc.want, cell.StoppedEarly)
			require.Equal(t, tc.want, cell.Runs[0].StoppedEarly)
			index, err := os.ReadFile(filepath.Join(dir, campaigns.IndexFile))
			require.NoError(t, err)
			if tc.want {
				require.Contains(t, string(index), "at least 1 double-holder")
				require.Contains(t, string(index), "cut at first violation")
			} else {
				require.NotContains(t, string(index), "at least 1 double-holder")
				require.Contains(t, string(index), "no: full time limits")
			}
			// A resume keeps the setting and refuses another.
			code, out = runCampaignCmd(t, "--resume", dir, "--stop-early="+map[bool]string{true: "false", false: "true"}[tc.want], "--quiet")
			require.Equal(t, exitError, code, out)
			require.Contains(t, out, "resume: the campaign runs with --stop-early")
		})
	}
	help := newCampaignCmd()
	require.Contains(t, help.Long, "--stop-early=false")
	require.NotNil(t, help.Flags().Lookup("stop-early"))
	require.Equal(t, "true", help.Flags().Lookup("stop-early").DefValue)
}

// TestCampaignConfigExpectsNA: an expectation on a cell whose fault does
// not apply (and that no other topology of the scheme takes) is a config
// error: exit 2, one line naming the cell, the fault and why.
func TestCampaignConfigExpectsNA(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("cells:\n  - lock: redis-lua\n    expect: {none: safe, failover: safe}\n"), 0o644))
	c := newCampaignCmd()
	c.SetOut(&bytes.Buffer{})
	c.SetErr(&bytes.Buffer{})
	c.SetArgs([]string{"--config", cfg, "--dir", t.TempDir(), "--quiet"})
	err := c.ExecuteContext(context.Background())
	var ec exitCode
	require.ErrorAs(t, err, &ec)
	require.Equal(t, exitError, ec.code)
	msg := ec.err.Error()
	require.NotContains(t, msg, "\n")
	require.Contains(t, msg, "cell redis-lua/failover")
	require.Contains(t, msg, "expects safe, but failover does not apply: topology redis has no primary with a replica to fail over")
	require.True(t, strings.HasPrefix(msg, cfg+": "), msg)
}

// TestCampaignShrink: --shrink shrinks the cells that are unsafe without
// being expected to be, each within the budget, into DIR/shrink/<cell>;
// cells expected unsafe (or either) are left alone.
func TestCampaignShrink(t *testing.T) {
	cfg := writeThreeCells(t)
	origRunner, origShrink := campaignRunner, campaignShrink
	t.Cleanup(func() { campaignRunner, campaignShrink = origRunner, origShrink })
	campaignRunner = fakeRunner{map[string]checker.Verdict{"redis-lua/none": checker.Unsafe, "redis-lua/pause": checker.Unsafe,
		"redis-setnx/crash-client": checker.Unsafe, "redis-del/pause": checker.Unsafe}}
	var shrunk []string
	campaignShrink = func(_ context.Context, dir string, o *ShrinkOptions, _ io.Writer) (*shrink.Report, string, error) {
		require.Equal(t, 45*time.Second, o.Budget)
		require.Equal(t, 2, o.Tries)
		_, err := os.Stat(dir)
		require.NoError(t, err, "the cell's run directory")
		shrunk = append(shrunk, filepath.Base(o.Out))
		return &shrink.Report{Stopped: shrink.StoppedDone, Minimal: shrink.Config{Clients: 2}}, o.Out, nil
	}
	dir := filepath.Join(t.TempDir(), "camp")
	code, out := runCampaignCmd(t, "--config", cfg, "--dir", dir, "--quiet", "--shrink", "--shrink-budget", "45s")
	require.Equal(t, exitUnsafe, code, out)
	require.Equal(t, []string{"redis-lua_none"}, shrunk)
	require.Contains(t, out, "shrink redis-lua/none: none, 2 clients")

	// Without expectations every unsafe cell is unexpected.
	shrunk = nil
	code, out = runCampaignCmd(t, "--locks", "redis-del", "--nemeses", "pause", "--dir", filepath.Join(t.TempDir(), "c2"), "--quiet", "--shrink", "--shrink-budget", "45s")
	require.Equal(t, exitSafe, code, out)
	require.Equal(t, []string{"redis-del_pause"}, shrunk)

	code, out = runCampaignCmd(t, "--config", cfg, "--dir", t.TempDir(), "--shrink", "--shrink-budget", "0s")
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "--shrink-budget must be a positive duration (got 0s)", "the campaign's own flag")
	code, out = runCampaignCmd(t, "--config", cfg, "--dir", t.TempDir(), "--shrink", "--shrink-tries", "0")
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "--shrink-tries must be 1..20 (got 0)")
}

// TestCampaignShrinkInterrupted: Ctrl-C during a cell's shrink is an
// interrupted campaign (exit 130) that says where the shrinks are; the
// cells not shrunk yet say so.
func TestCampaignShrinkInterrupted(t *testing.T) {
	origRunner, origShrink := campaignRunner, campaignShrink
	t.Cleanup(func() { campaignRunner, campaignShrink = origRunner, origShrink })
	campaignRunner = fakeRunner{map[string]checker.Verdict{"redis-del/pause": checker.Unsafe, "redis-del/kill": checker.Unsafe}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var shrunk int
	campaignShrink = func(_ context.Context, _ string, o *ShrinkOptions, _ io.Writer) (*shrink.Report, string, error) {
		shrunk++
		cancel() // Ctrl-C during the first cell's shrink
		return &shrink.Report{Stopped: shrink.StoppedInterrupted, Minimal: shrink.Config{Clients: 3}}, o.Out, nil
	}
	dir := filepath.Join(t.TempDir(), "camp")
	code, out := runCampaignCmdContext(t, ctx, "--locks", "redis-del", "--nemeses", "pause,kill", "--dir", dir, "--quiet", "--shrink")
	require.Equal(t, exitInterrupted, code, out)
	require.Equal(t, 1, shrunk)
	require.Contains(t, out, "not started (interrupted)")
	require.Contains(t, out, "interrupted while shrinking")
	require.Contains(t, out, filepath.Join(dir, campaignShrinkDir))
}
