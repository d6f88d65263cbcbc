package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/reports"
)

// TestCampaignReal runs a tiny real campaign (2 cells of 5 s against a
// real redis-server), regenerates its pages with `report` and browses them
// with `serve`.
func TestCampaignReal(t *testing.T) {
	needServer(t)
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "camp")
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`name: tiny
defaults: {time_limit: 5s}
cells:
  - lock: redis-lua
    expect: {none: safe, pause: either}
`), 0o644))
	r := run(t, nil, "campaign", "--config", cfg, "--dir", dir)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "[1/2] redis-lua/none seed 1")
	require.Contains(t, r.stdout, "as expected")
	require.Contains(t, r.stdout, "cluster start-up")
	c, err := reports.ReadCampaign(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	// (An expectation on redis-lua/failover, n/a, is a config error now:
	// TestCampaignConfigExpectsNA.)
	require.Len(t, c.Cells, 2)
	for _, id := range []string{"redis-lua/none", "redis-lua/pause"} {
		cell := c.Cell(id)
		require.Equal(t, reports.AsExpected, cell.Outcome, id)
		require.Len(t, cell.Runs, 1)
		require.FileExists(t, filepath.Join(dir, cell.Runs[0].Dir, "report.html"))
	}
	// One redis-server for both: started for the first, reused by the second.
	require.Positive(t, c.Cell("redis-lua/none").Runs[0].StartupNs)
	require.True(t, c.Cell("redis-lua/pause").Runs[0].Reused)
	require.Zero(t, c.Cell("redis-lua/pause").Runs[0].StartupNs)
	require.Positive(t, c.StartupNs)
	require.Greater(t, c.WallNs, c.StartupNs)

	// report regenerates every page from the histories.
	require.NoError(t, os.Remove(filepath.Join(dir, "index.html")))
	r = run(t, nil, "report", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.FileExists(t, filepath.Join(dir, "index.html"))

	// serve answers on 127.0.0.1 and stops on SIGINT.
	cmd := exec.Command(bin, "serve", dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	i := strings.Index(line, "http://127.0.0.1:")
	require.GreaterOrEqual(t, i, 0, line)
	url := strings.Fields(line[i:])[0]
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url + "index.html")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `class="matrix"`)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait())
}

// TestShardsReal runs a small real campaign (3 redis cells of 3 s) whole
// and as 2 shards side by side on this machine, merged: the same cells
// and seeds, every cell as expected in both.
func TestShardsReal(t *testing.T) {
	needServer(t)
	t.Parallel()
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`name: shards
defaults: {time_limit: 3s}
cells:
  - lock: redis-lua
    expect: {none: safe, pause: either}
  - lock: redis-setnx
    expect: {none: safe}
`), 0o644))
	whole := filepath.Join(tmp, "whole")
	r := run(t, nil, "campaign", "--config", cfg, "--dir", whole)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)

	// Two shards at once, as two machines would run them.
	type shardRun struct {
		dir string
		res chan result
	}
	var shards []shardRun
	for k := 1; k <= 2; k++ {
		s := shardRun{filepath.Join(tmp, fmt.Sprintf("shard%d", k)), make(chan result, 1)}
		shards = append(shards, s)
		go func(k int) {
			s.res <- runNoT(bin, "campaign", "--config", cfg, "--dir", s.dir, "--shard", fmt.Sprintf("%d/2", k))
		}(k)
	}
	var dirs []string
	for _, s := range shards {
		r := <-s.res
		require.Equal(t, 0, r.code, r.stdout+r.stderr)
		dirs = append(dirs, s.dir)
	}
	merged := filepath.Join(tmp, "merged")
	r = run(t, nil, append([]string{"report", "--merge", merged}, dirs...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "(3 cells from 2 shards)")

	w, err := reports.ReadCampaign(filepath.Join(whole, "results.json"))
	require.NoError(t, err)
	m, err := reports.ReadCampaign(filepath.Join(merged, "results.json"))
	require.NoError(t, err)
	require.Len(t, m.Cells, len(w.Cells))
	require.Len(t, w.Cells, 3)
	for i := range w.Cells {
		wc, mc := w.Cells[i], m.Cells[i]
		require.Equal(t, wc.ID, mc.ID)
		require.Equal(t, reports.AsExpected, wc.Outcome, wc.ID)
		require.Equal(t, reports.AsExpected, mc.Outcome, mc.ID)
		require.Len(t, wc.Runs, 1)
		require.Len(t, mc.Runs, 1)
		require.Equal(t, wc.Runs[0].Seed, mc.Runs[0].Seed, wc.ID)
		require.FileExists(t, filepath.Join(merged, mc.Runs[0].Dir, "report.html"))
		require.FileExists(t, filepath.Join(merged, mc.Runs[0].Dir, "history.jsonl"))
	}
	// Each shard ran a share of its own: together every cell once.
	ran := map[string]int{}
	for _, d := range dirs {
		c, err := reports.ReadCampaign(filepath.Join(d, "results.json"))
		require.NoError(t, err)
		require.NotEmpty(t, c.Cells, d)
		for _, cell := range c.Cells {
			ran[cell.ID] += len(cell.Runs)
		}
	}
	require.Equal(t, map[string]int{"redis-lua/none": 1, "redis-lua/pause": 1, "redis-setnx/none": 1}, ran)
	// The merged pages regenerate from the copied runs.
	r = run(t, nil, "report", merged)
	require.Equal(t, 0, r.code, r.stderr)
}

// runNoT runs the locktest binary outside the test's goroutine.
func runNoT(bin string, args ...string) result {
	cmd := exec.Command(bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return result{ee.ExitCode(), out.String(), errb.String()}
	case err != nil:
		return result{-1, out.String(), err.Error()}
	}
	return result{0, out.String(), errb.String()}
}
