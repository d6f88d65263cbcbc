package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func pooledConfig(t *testing.T, runDir string) PooledCluster {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "config.json"))
	require.NoError(t, err)
	var cfg struct {
		Pooled *PooledCluster `json:"pooled_cluster"`
	}
	require.NoError(t, json.Unmarshal(b, &cfg))
	require.NotNil(t, cfg.Pooled)
	return *cfg.Pooled
}

// A pooled cluster is reused after a normal run, not after an interrupted
// one, and not when its health check fails (here: its server frozen); the
// pool stops everything it started.
func TestPoolReuseAndHealth(t *testing.T) {
	t.Parallel()
	needServer(t)
	slot(t, 10*time.Second) // five runs of 2 s
	pool := NewPool(t.TempDir())
	defer pool.Close()
	run := func(ctx context.Context, seed int64) *Outcome {
		t.Helper()
		o := baseOptions(t, "redis-lua", "none", seed)
		o.TimeLimit, o.Pool, o.Fence = 2*time.Second, pool, true
		out, err := Run(ctx, o)
		require.NoError(t, err)
		return out
	}
	first := run(context.Background(), 1)
	require.NotEmpty(t, first.Cluster)
	require.False(t, first.Reused)
	require.Positive(t, first.Startup)
	second := run(context.Background(), 2)
	require.True(t, second.Reused)
	require.Zero(t, second.Startup)
	require.Equal(t, first.Cluster, second.Cluster)
	pc := pooledConfig(t, second.Dir)
	require.Equal(t, pooledConfig(t, first.Dir).PIDs, pc.PIDs)
	require.Equal(t, 2, pc.Run)
	// Each run's clients used a key of their own: the second run's fencing
	// counter starts again at 1 on the same server.
	require.Equal(t, int64(1), firstToken(t, first.Dir))
	require.Equal(t, int64(1), firstToken(t, second.Dir))

	// A frozen server accepts connections but never answers: not reused.
	frozen := pc.PIDs[0]
	require.True(t, isRedis(frozen))
	require.NoError(t, syscall.Kill(frozen, syscall.SIGSTOP))
	// The stop takes effect once the kernel schedules the process.
	require.Eventually(t, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(frozen) + "/stat")
		return err == nil && strings.Contains(string(b), ") T ")
	}, 5*time.Second, 10*time.Millisecond)
	third := run(context.Background(), 3)
	require.False(t, third.Reused)
	require.NotEqual(t, second.Cluster, third.Cluster)
	require.False(t, alive(frozen), "the unhealthy cluster is stopped")
	log, err := os.ReadFile(filepath.Join(second.Cluster, "pool.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "not reused: redis-1 (pid "+strconv.Itoa(frozen)+") is in state T")

	// An interrupted run gives its cluster back stopped.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fourth := run(ctx, 4)
	require.True(t, fourth.Interrupted)
	require.True(t, fourth.Reused)
	fifth := run(context.Background(), 5)
	require.False(t, fifth.Reused)
	require.NotEqual(t, fourth.Cluster, fifth.Cluster)

	st := pool.Stats()
	require.Equal(t, 3, st.Starts)
	require.Equal(t, 2, st.Reuses)
	require.Equal(t, 2, st.Retired)
	pool.Close()
	for _, out := range []*Outcome{first, third, fifth} {
		assertNothingLeft(t, out.Dir)
		// The servers' command lines name the pooled cluster's directory.
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), out.Cluster) {
				continue
			}
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			require.False(t, alive(pid), "pid %d still runs: %s", pid, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// firstToken is the lowest fencing token a run's acquires got.
func firstToken(t *testing.T, runDir string) int64 {
	t.Helper()
	h, err := history.Load(filepath.Join(runDir, "history.jsonl"))
	require.NoError(t, err)
	low := int64(-1)
	for _, op := range h.Ops {
		if op.Type == history.OK && op.Op == history.Acquire && op.Token != nil && (low < 0 || *op.Token < low) {
			low = *op.Token
		}
	}
	require.Positive(t, low, "no fenced acquire in %s", runDir)
	return low
}

// A resumed campaign's pool never starts a cluster in the directory of one
// an earlier session of the campaign started.
func TestPoolNewDirectory(t *testing.T) {
	t.Parallel()
	needServer(t)
	slot(t, time.Second)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "redis-1", "servers"), 0o755))
	pool := NewPool(dir)
	defer pool.Close()
	o := baseOptions(t, "redis-lua", "none", 1)
	o.TimeLimit, o.Pool = time.Second, pool
	out, err := Run(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "redis-2"), out.Cluster)
	require.Equal(t, "redis-2", pooledConfig(t, out.Dir).Name)
}
