package shrink

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/harness"
)

// unsafeRunDir is a checked unsafe run with its config.json and the
// hand-written schedule.json.
func unsafeRunDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	minimalRun(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"),
		[]byte(`{"options": {"lock": "redis-lua", "nemesis": "pause,kill", "clients": 3, "time_limit": 6000000000, "seed": 42, "params": {"kill": "leader"}}}`), 0o644))
	b, err := os.ReadFile(filepath.Join("testdata", "schedule.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ScheduleFile), b, 0o644))
	return dir
}

func setReplay(t *testing.T, f func(*harness.Options, string)) {
	t.Helper()
	orig := Replay
	Replay = f
	t.Cleanup(func() { Replay = orig })
}

// A run's schedule.json is shrunk only by a build that can replay it;
// until then shrink says so and draws the faults from the names.
func TestLoadOriginal(t *testing.T) {
	dir := unsafeRunDir(t)
	setReplay(t, nil)
	orig, base, note, err := LoadOriginal(dir)
	require.NoError(t, err)
	require.Nil(t, orig.Config.Schedule)
	require.Contains(t, note, "cannot replay")
	require.Equal(t, Config{Nemeses: []string{"pause", "kill"}, Clients: 3, TimeLimit: 6 * time.Second, Params: map[string]string{"kill": "leader"}}, orig.Config)
	require.Equal(t, "redis-lua", base.Lock)
	require.Equal(t, int64(42), orig.Seed, "every candidate runs with the original's seed")
	require.Len(t, orig.Faults, 1, "the faults of its history")

	setReplay(t, func(o *harness.Options, f string) {})
	orig, _, note, err = LoadOriginal(dir)
	require.NoError(t, err)
	require.Empty(t, note)
	require.Len(t, orig.Config.Schedule.Faults, 5)
}

// With a schedule, the runner writes the candidate's schedule and hands
// it to the run (Replay); without a build that replays, it refuses.
func TestHarnessRunnerSchedule(t *testing.T) {
	dir := unsafeRunDir(t)
	setReplay(t, func(o *harness.Options, f string) {})
	orig, base, _, err := LoadOriginal(dir)
	require.NoError(t, err)
	c := orig.Config.Clone()
	c.Schedule = c.Schedule.With([]int{2})
	base.Lock = "no-such-lock" // refused before any server starts
	out := t.TempDir()
	var replayed string
	setReplay(t, func(o *harness.Options, f string) { replayed = f })
	r := &HarnessRunner{Base: base, Dir: out}
	_, err = r.Run(context.Background(), c, "c4-1")
	var inv InvalidError
	require.ErrorAs(t, err, &inv, "a usage error of the harness is an invalid candidate")
	require.Equal(t, filepath.Join(out, SchedulesDir, "c4-1.json"), replayed)
	s, err := LoadSchedule(replayed)
	require.NoError(t, err)
	require.Len(t, s.Faults, 1)
	require.Equal(t, int64(3), s.Faults[0].ID())

	setReplay(t, nil)
	_, err = r.Run(context.Background(), c, "c5-1")
	require.ErrorAs(t, err, &inv)
	require.ErrorContains(t, err, "cannot replay a schedule")
}
