package campaigns_test

import (
	"bytes"
	"context"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/reports"
)

// syncBuffer is a bytes.Buffer safe for the campaign's workers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgressNumbersEachRunOnce: with --parallel 2 runs end in another
// order than they start; each run keeps the number it got when it
// started on its result line. The summed workload time is not shown as a
// share above 100%.
func TestProgressNumbersEachRunOnce(t *testing.T) {
	c, err := campaigns.PlanLists(campaigns.Lists{Locks: "redis-lua", Nemeses: "none,pause,kill,crash-client", Settings: campaigns.Settings{TimeLimit: campaigns.Duration(time.Second)}}, campaigns.Environment{})
	require.NoError(t, err)
	var calls atomic.Int32
	runner := runnerFunc(func(_ context.Context, o harness.Options) (*harness.Outcome, error) {
		// The first run to start is the slowest: the second ends first.
		if calls.Add(1) == 1 {
			time.Sleep(1500 * time.Millisecond)
		}
		return &harness.Outcome{Result: checker.Result{Verdict: checker.Safe, FirstViolation: -1,
			Counts: checker.Counts{DurationNs: int64(time.Second)}}}, nil
	})
	var out syncBuffer
	require.NoError(t, campaigns.Run(context.Background(), c, campaigns.Options{Dir: t.TempDir(), Runner: runner, Parallel: 2, Out: &out}))
	started := map[string]string{}
	ended := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\[(\d+)/4\] (\S+) seed 1: (running|safe)`).FindAllStringSubmatch(out.String(), -1) {
		if m[3] == "running" {
			started[m[2]] = m[1]
		} else {
			ended[m[2]] = m[1]
		}
	}
	require.Len(t, started, 4, out.String())
	require.Equal(t, started, ended, out.String())
	nums := map[string]bool{}
	for _, n := range started {
		nums[n] = true
	}
	require.Equal(t, map[string]bool{"1": true, "2": true, "3": true, "4": true}, nums, "each run numbered once")
	// The first run ended last, with its own number.
	results := regexp.MustCompile(`(?m)^\[(\d+)/4\] \S+ seed 1: safe`).FindAllStringSubmatch(out.String(), -1)
	require.Len(t, results, 4)
	require.NotEqual(t, "1", results[0][1], out.String())

	require.Equal(t, 2, c.Parallel)
	require.Greater(t, c.WorkloadNs, c.WallNs, "4 runs of 1 s in about 2 s")
	require.Equal(t, "summed over 2 parallel slots", c.Share(c.WorkloadNs))
	one := &reports.Campaign{WallNs: 10, Parallel: 1}
	require.Equal(t, "50%", one.Share(5))
	require.Equal(t, "summed over runs side by side", one.Share(20), "never a share above 100%")
}
