package main

import (
	"bufio"
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
