package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/runstate"
	"github.com/locktest/locktest/shrink"
)

// checkedRun makes a run directory from a recorded history and checks it.
func checkedRun(t *testing.T, history string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "..", "checker", "testdata", history))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "history.jsonl"), b, 0o644))
	r := run(t, nil, "check", dir, "--quiet")
	require.Contains(t, []int{0, 1}, r.code, r.stderr)
	return dir
}

func TestShrinkBadInput(t *testing.T) {
	safe := checkedRun(t, "good-mutex.jsonl")
	unsafe := checkedRun(t, "bad-lease-pause.jsonl") // no config.json: cannot be run again
	configured := checkedRun(t, "bad-lease-pause.jsonl")
	require.NoError(t, os.WriteFile(filepath.Join(configured, "config.json"), []byte(`{"options": {"lock": "redis-lua", "nemesis": "pause", "clients": 3, "time_limit": 6000000000}}`), 0o644))
	// The terminal hints at shrink only for a run it can run again.
	require.NotContains(t, run(t, nil, "check", unsafe, "--quiet").stdout, "shrink this run", "no config.json: shrink would refuse it")
	require.Contains(t, run(t, nil, "check", configured, "--quiet").stdout, "shrink this run: locktest shrink "+configured)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"safe run", []string{safe}, "is safe, not unsafe: shrink looks for the smallest run that still fails"},
		{"no history", []string{t.TempDir()}, "is not a run directory: no history.jsonl"},
		{"missing dir", []string{filepath.Join(t.TempDir(), "none")}, "is not a run directory: no history.jsonl"},
		{"budget not a duration", []string{unsafe, "--budget", "soon"}, `invalid argument "soon" for "--budget"`},
		{"budget zero", []string{unsafe, "--budget", "0s"}, "--budget must be a positive duration"},
		{"no tries", []string{unsafe, "--tries", "0"}, "--tries must be 1..20"},
		{"no config", []string{unsafe}, "has no readable config.json"},
		{"property not in the run", []string{configured, "--property", "foreign-release"}, "--property foreign-release: " + configured + " has no such violation (it has: double-holder:lease-expired, lost-update)"}, // as --property takes them,
		{"property of another cause", []string{configured, "--property", "double-holder:lease-broken"}, "has no such violation"},
		{"no run dir", nil, "accepts 1 arg(s), received 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, append([]string{"shrink"}, tc.args...)...)
			require.Equal(t, 2, r.code, "stdout: %s stderr: %s", r.stdout, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			require.Len(t, lines, 1, "one clear line, got: %q", r.stderr)
			require.True(t, strings.HasPrefix(lines[0], "locktest: "), lines[0])
			require.Contains(t, lines[0], tc.want)
		})
	}
	for _, dir := range []string{safe, unsafe, configured} {
		_, err := os.Stat(filepath.Join(dir, "shrink"))
		require.True(t, os.IsNotExist(err), "a refused shrink leaves no directory")
	}
}

// An unsafe redis-lua run under pause (a short TTL: every pause outlives
// the lease) shrinks, on a real redis-server, to fewer clients and a
// shorter run that still fails the same way; Ctrl-C in the middle of a
// shrink keeps the best so far and leaves nothing behind.
func TestShrinkRealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers for about a minute")
	}
	needServer(t)
	t.Parallel()
	store := t.TempDir()
	r := run(t, nil, "run", "--lock", "redis-lua", "--nemesis", "pause", "--clients", "5", "--time-limit", "10s",
		"--ttl", "500ms", "--hold", "50ms..200ms", "--seed", "7", "--store", store, "--quiet")
	require.Equal(t, 1, r.code, "the original must be unsafe: %s %s", r.stdout, r.stderr)
	orig := filepath.Join(store, "latest")
	require.Contains(t, r.stdout, "shrink this run: locktest shrink "+filepath.Join(store, "redis-lua", "pause"))

	// Both read the original run only: they run side by side.
	t.Run("shrinks", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "s")
		r := run(t, nil, "shrink", orig, "--budget", "100s", "--tries", "2", "--confirm", "5", "--out", out)
		require.Equal(t, 0, r.code, "stdout: %s stderr: %s", r.stdout, r.stderr)
		rep, err := shrink.LoadReport(out)
		require.NoError(t, err)
		require.True(t, rep.Finished)
		require.Equal(t, shrink.Property{Kind: checker.KindDoubleHolder, Cause: checker.CauseLeaseExpired}, rep.Property)
		require.Less(t, rep.Minimal.Clients, 5)
		require.Less(t, rep.Minimal.TimeLimit, 10*time.Second)
		require.Equal(t, []string{"pause"}, rep.Minimal.Nemeses, "the violation needs the pause: without it holds stay within the lease")
		require.GreaterOrEqual(t, rep.Rate.Reproduced, 4, "rate: %s", rep.Rate)
		require.Equal(t, 5, rep.Rate.Tries)
		for _, c := range rep.Candidates {
			require.NotEmpty(t, c.Outcome)
			require.NotEmpty(t, c.Tries)
		}
		// The minimal run is a real run of the minimal configuration that
		// failed the same way.
		var res checker.Result
		b, err := os.ReadFile(filepath.Join(out, shrink.MinimalLink, "results.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &res))
		_, ok := rep.Property.Match(&res)
		require.True(t, ok)
		h, err := history.Load(filepath.Join(out, shrink.MinimalLink, "history.jsonl"))
		require.NoError(t, err)
		require.Equal(t, rep.Minimal.Clients, h.Info.Clients)
		require.LessOrEqual(t, h.End, int64(rep.Minimal.TimeLimit)+int64(2*time.Second))
		script, err := os.ReadFile(filepath.Join(out, shrink.ReproFile))
		require.NoError(t, err)
		require.Contains(t, string(script), rep.Command)
		require.Contains(t, rep.Command, "--clients 2 ")
		page, err := os.ReadFile(filepath.Join(out, shrink.PageFile))
		require.NoError(t, err)
		require.Contains(t, string(page), `class="own"`)
		replayedSchedule(t, rep, h)
	})

	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "s")
		stateDir := t.TempDir()
		cmd := exec.Command(bin, "shrink", orig, "--budget", "60s", "--out", out)
		cmd.Env = append(os.Environ(), "LOCKTEST_STATE_DIR="+stateDir)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		require.NoError(t, cmd.Start())
		waitForFault(t, cmd, filepath.Join(out, shrink.RunsDir), 30*time.Second, &buf)
		pids := statePIDs(t, stateDir)
		require.NotEmpty(t, pids)
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		err := cmd.Wait()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, buf.String())
		require.Equal(t, 130, ee.ExitCode(), buf.String())
		require.Contains(t, buf.String(), "interrupted; the best found so far is in "+out)
		for _, pid := range pids {
			waitGone(t, pid)
		}
		noStateLeft(t, stateDir)
		rep, err := shrink.LoadReport(out)
		require.NoError(t, err)
		require.Equal(t, shrink.StoppedInterrupted, rep.Stopped)
		require.True(t, rep.Finished)
		last := rep.Candidates[len(rep.Candidates)-1]
		require.Equal(t, shrink.Interrupted, last.Outcome)
		h, err := history.Load(filepath.Join(out, last.Tries[len(last.Tries)-1].Dir, "history.jsonl"))
		require.NoError(t, err)
		for _, f := range h.Faults {
			require.NotEqual(t, history.Never, f.End, "fault %s never healed", f.Name)
		}
	})
}

// replayedSchedule checks that a shrink of a run with a schedule.json
// shrank over the schedule's faults (ddmin over its entries, then shorter
// lengths) and that the minimal run h replayed its schedule.
func replayedSchedule(t *testing.T, rep *shrink.Report, h *history.History) {
	t.Helper()
	require.True(t, rep.Replay, "the candidates replay schedules (note: %s)", rep.Note)
	require.NotEmpty(t, rep.Original.Faults, "the original's schedule.json holds its faults")
	tried := map[shrink.Step]int{}
	for _, c := range rep.Candidates {
		tried[c.Step]++
		require.NotEqual(t, shrink.StepNemeses, c.Step, "with a schedule, faults are cut entry by entry, not by --nemesis name")
	}
	if len(rep.Original.Faults) > 1 {
		require.Positive(t, tried[shrink.StepFaults], "ddmin over the schedule's entries")
		require.Less(t, len(rep.Minimal.Faults), len(rep.Original.Faults), "fewer faults: %v of %v", rep.Minimal.Faults, rep.Original.Faults)
	}
	require.NotEmpty(t, rep.Minimal.Faults, "the violation needs a pause")
	require.Positive(t, tried[shrink.StepLengths], "shorter fault lengths tried")
	t.Logf("original faults %v; minimal %v", rep.Original.Faults, rep.Minimal.Faults)
	require.Contains(t, rep.Command, "--schedule "+shrink.ReproSched)
	require.NotEmpty(t, h.Info.ReplayedFrom, "the minimal run replayed its schedule")
	var fired int
	for _, f := range h.Faults {
		if f.Name == "pause" {
			fired++
		}
	}
	require.Positive(t, fired, "the minimal run's replay injected its pause")
}

// statePIDs are the processes (servers, clients) the runs recorded in
// stateDir have started.
func statePIDs(t *testing.T, stateDir string) []int {
	t.Helper()
	var pids []int
	files, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var st runstate.State
		require.NoError(t, json.Unmarshal(b, &st))
		for _, p := range st.Procs {
			pids = append(pids, p.PID)
		}
	}
	return pids
}
