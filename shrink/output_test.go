package shrink

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/workloads"
)

// minimalRun makes a run directory from a recorded history with one pause
// and the double holder it causes, checked.
func minimalRun(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	b, err := os.ReadFile(filepath.Join("..", "checker", "testdata", "bad-lease-pause.jsonl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "history.jsonl"), b, 0o644))
	h, err := history.Load(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	res := checker.Check(h, checker.DefaultOptions())
	require.NoError(t, reports.WriteResultsJSON(filepath.Join(dir, "results.json"), &res))
}

// The shrink directory holds one `locktest run` line replaying the
// minimal schedule, the link to a run that reproduced, shrink.json with
// paths relative to it, and shrink.html with the original next to the
// result and the anomaly's operations and fault on a time line.
func TestWriteOutputs(t *testing.T) {
	out := t.TempDir()
	runDir := filepath.Join(out, RunsDir, "redis-lua", "pause", "t1")
	minimalRun(t, runDir)
	r, o := newStub(t)
	r.dir = runDir
	rep, err := Shrink(context.Background(), r, original(t, true), o)
	require.NoError(t, err)
	base := harness.Options{Lock: "redis-lua", TTL: time.Second, Seed: 42, OpTimeout: time.Second, Cluster: "local",
		Hold: workloads.Range{Min: 50 * time.Millisecond, Max: 250 * time.Millisecond}, Think: workloads.Range{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond}}
	require.NoError(t, WriteOutputs(out, rep, base))

	script, err := os.ReadFile(filepath.Join(out, ReproFile))
	require.NoError(t, err)
	var runs []string
	for _, l := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(l, "locktest ") {
			runs = append(runs, l)
		}
	}
	require.Len(t, runs, 1, "one locktest line: %s", script)
	for _, want := range []string{"locktest run --lock redis-lua --nemesis pause --clients 2 ", "--seed 42", "--stop-early", "--schedule repro-schedule.json"} {
		require.Contains(t, runs[0], want)
	}
	require.NotContains(t, runs[0], "--param")
	sched, err := LoadSchedule(filepath.Join(out, ReproSched))
	require.NoError(t, err)
	require.Len(t, sched.Faults, 1)
	require.Equal(t, "pause", sched.Faults[0].Nemesis())

	target, err := os.Readlink(filepath.Join(out, MinimalLink))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(RunsDir, "redis-lua", "pause", "t1"), target)
	_, err = os.Stat(filepath.Join(out, MinimalLink, "history.jsonl"))
	require.NoError(t, err)

	back, err := LoadReport(out)
	require.NoError(t, err)
	require.True(t, back.Finished)
	require.Equal(t, int64(7), back.Seed)
	require.Equal(t, target, back.MinimalDir)
	require.Equal(t, runs[0], back.Command)
	require.Equal(t, rep.Candidates[0].Tries[0].Dir, target, "run directories relative to the shrink directory")

	page, err := os.ReadFile(filepath.Join(out, PageFile))
	require.NoError(t, err)
	p := string(page)
	for _, want := range []string{
		"double-holder (lease-expired)", "5 of 5 tries",
		"<th>--clients</th><td>5</td><td>2</td>",
		"<th>--nemesis</th><td>kill,partition,pause</td><td>pause</td>",
		`class="fault"`, "pause client 1, 1.01-5.20 s", // the one fault, from the minimal run's history
		`class="own"`, "client 1", "client 2",
		"still believed it held it", // the checker's words on the minimal run's anomaly
	} {
		require.Contains(t, p, want)
	}
	require.NotContains(t, p, "http", "the page loads nothing")
}

// The witness keeps the anomaly's own operations, drops failed tries and
// shows when each client believed it held the lock.
func TestWitnessOf(t *testing.T) {
	dir := t.TempDir()
	minimalRun(t, dir)
	h, err := history.Load(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	var res checker.Result
	require.NoError(t, readJSON(filepath.Join(dir, "results.json"), &res))
	a, ok := Property{Kind: checker.KindDoubleHolder, Cause: checker.CauseLeaseExpired}.Match(&res)
	require.True(t, ok)
	w := witnessOf(h, a)
	require.Len(t, w.Rows, len(a.Clients))
	own := 0
	for _, row := range w.Rows {
		for _, b := range row.Bars {
			require.NotContains(t, b.Label, "acquire fail")
			require.GreaterOrEqual(t, b.X, float64(witnessLabelW))
			require.LessOrEqual(t, b.X+b.W, float64(witnessWidth))
			if b.Class == "own" {
				own++
			}
		}
	}
	require.Equal(t, len(a.Ops), own)
	require.Len(t, w.Faults, 1)
	// A double holder: both clients believed they held the lock when it
	// began.
	for _, row := range w.Rows {
		covered := false
		for _, hd := range row.Holds {
			covered = covered || hd.X <= w.Anomaly.X && hd.X+hd.W >= w.Anomaly.X
		}
		require.True(t, covered, "%s holds %v, anomaly at x=%v", row.Label, row.Holds, w.Anomaly.X)
	}
}

// repro.sh runs without locktest on PATH: with $LOCKTEST when set, else
// the locktest that wrote it; the locktest on PATH when there is one and
// $LOCKTEST is not set. Each time with the repro line's arguments, from
// the shrink directory.
func TestReproScriptFindsLocktest(t *testing.T) {
	out := t.TempDir()
	r, o := newStub(t)
	rep, err := Shrink(context.Background(), r, original(t, false), o)
	require.NoError(t, err)
	base := harness.Options{Lock: "redis-lua", TTL: time.Second, Seed: 42, OpTimeout: time.Second}
	bin := t.TempDir()
	self := filepath.Join(bin, "self")
	fake := func(path, name string) {
		script := "#!/bin/sh\necho \"" + name + " $PWD $*\" > \"$FAKE_OUT\"\n"
		require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	}
	fake(self, "self")
	fake(filepath.Join(bin, "locktest"), "path")
	fake(filepath.Join(bin, "other"), "env")
	self0 := reproLocktest
	reproLocktest = func() string { return self }
	defer func() { reproLocktest = self0 }()
	require.NoError(t, WriteOutputs(out, rep, base))
	args := strings.TrimPrefix(rep.Command, "locktest ")

	for _, c := range []struct{ path, env, want string }{
		{"/usr/bin:/bin", "", "self"},
		{"/usr/bin:/bin", filepath.Join(bin, "other"), "env"},
		{bin + ":/usr/bin:/bin", "", "path"},
		{bin + ":/usr/bin:/bin", filepath.Join(bin, "other"), "env"},
	} {
		res := filepath.Join(t.TempDir(), "ran")
		cmd := exec.Command("/bin/sh", filepath.Join(out, ReproFile))
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"PATH=" + c.path, "LOCKTEST=" + c.env, "FAKE_OUT=" + res}
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "PATH=%s LOCKTEST=%s: %s", c.path, c.env, b)
		got, err := os.ReadFile(res)
		require.NoError(t, err)
		require.Equal(t, c.want+" "+out+" "+args+"\n", string(got), "PATH=%s LOCKTEST=%s", c.path, c.env)
	}
}

// The --param row of shrink.html lists the settings in one order, not in
// the map's.
func TestParamWordsSorted(t *testing.T) {
	p := map[string]string{"partition": "isolate-holder", "kill": "leader", "keep_datadir": "true", "b": "1", "a": "2"}
	for range 20 {
		require.Equal(t, "a=2 b=1 keep_datadir=true kill=leader partition=isolate-holder", paramWords(p))
	}
}

// The minimal run's report, written while it was a candidate, offered
// "Shrink this run"; once the shrink links it as minimal, it says the run
// is already minimal (and a report written again says so too).
func TestMinimalRunIsNotOfferedAShrink(t *testing.T) {
	out := t.TempDir()
	runDir := filepath.Join(out, RunsDir, "redis-lua", "pause", "t1")
	minimalRun(t, runDir)
	require.NoError(t, os.WriteFile(filepath.Join(runDir, "config.json"), []byte(`{"options": {"lock": "redis-lua"}}`), 0o644))
	h, err := history.Load(filepath.Join(runDir, "history.jsonl"))
	require.NoError(t, err)
	res := checker.Check(h, checker.DefaultOptions())
	require.Equal(t, checker.Unsafe, res.Verdict)
	require.NoError(t, reports.WriteRunDir(runDir, h, &res))
	page, err := os.ReadFile(filepath.Join(runDir, "report.html"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(page), "Shrink this run"), "a candidate's report, before the shrink ends")

	r, o := newStub(t)
	r.dir = runDir
	rep, err := Shrink(context.Background(), r, original(t, true), o)
	require.NoError(t, err)
	require.NoError(t, WriteOutputs(out, rep, harness.Options{Lock: "redis-lua"}))
	page, err = os.ReadFile(filepath.Join(runDir, "report.html"))
	require.NoError(t, err)
	require.False(t, strings.Contains(string(page), "Shrink this run"), "the minimal run's report offers a shrink")
	require.True(t, strings.Contains(string(page), `<b>Already minimal:</b>`))
	require.True(t, strings.Contains(string(page), `<a href="../../../../shrink.html">shrink.html</a>`))
	require.Empty(t, reports.ShrinkCommand(runDir))

	require.NoError(t, reports.WriteRunDir(runDir, h, &res))
	again, err := os.ReadFile(filepath.Join(runDir, "report.html"))
	require.NoError(t, err)
	require.False(t, strings.Contains(string(again), "Shrink this run"), "a report written again")
	require.True(t, strings.Contains(string(again), `<b>Already minimal:</b>`))
}
