package reports

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMarkdownCellsListAnomalies: every cell of summary.md lists its
// violations by kind and count, as the matrix does ("at least" for a run
// cut at its first violation), with the contained ones, the causes, the
// topology it ran on and the mark of a cell that differs.
func TestMarkdownCellsListAnomalies(t *testing.T) {
	c := &Campaign{Schema: CampaignSchema, Name: "t", Runs: 1, Rows: []string{"mysql-get-lock", "redis-lua +fence"}, Columns: []string{"pause", "failover"}}
	add := func(cell Cell) {
		cell.ID = cell.Row + "/" + cell.Column
		cell.Summarize()
		c.Cells = append(c.Cells, cell)
	}
	add(Cell{Row: "mysql-get-lock", Column: "pause", Status: CellDone, Expect: ExpectSafe, Runs: []CellRun{{Seed: 1, Verdict: "unsafe", FirstViolationNs: 1,
		Anomalies: map[string]int{"double-holder": 3, "lost-update": 1}, StoppedEarly: true}}})
	add(Cell{Row: "mysql-get-lock", Column: "failover", Topology: "mysql-replicated", Note: "runs on mysql-replicated: no replica", Status: CellDone,
		Runs: []CellRun{{Seed: 1, Verdict: "unsafe", FirstViolationNs: 1, Anomalies: map[string]int{"double-holder": 2}, Causes: map[string]int{"lease-broken": 2}}}})
	add(Cell{Row: "redis-lua +fence", Column: "pause", Status: CellDone, Runs: []CellRun{{Seed: 1, Verdict: "safe", FirstViolationNs: -1, Contained: map[string]int{"double-holder": 4}}}})
	var b strings.Builder
	require.NoError(t, WriteCampaignMarkdown(&b, c, ""))
	md := b.String()
	require.Contains(t, md, "| `mysql-get-lock` | 🔴 unsafe: at least 3 double-holder, 1 lost-update ❗ | 🔴 unsafe: 2 double-holder; cause: 2 lease-broken (on mysql-replicated) |")
	require.Contains(t, md, "| `redis-lua +fence` | 🟢 safe: contained: 4 double-holder |  |")
}

// TestCampaignPageSaysWhatItMeans: the run of a reused cluster says
// "reused" rather than "-" for its start-up, the n/a and skipped cells'
// reasons are listed under the matrix (not only in tooltips), the legend
// has NOT RUN and INTERRUPTED, "held" says what it is, and timestamps do
// not wrap.
func TestCampaignPageSaysWhatItMeans(t *testing.T) {
	c := &Campaign{Schema: CampaignSchema, Name: "t", Runs: 1, Started: "2026-11-22T02:10:27Z", Finished: "2026-11-22T02:20:27Z",
		Rows: []string{"redis-lua"}, Columns: []string{"none", "pause", "failover", "partition"}}
	add := func(cell Cell) {
		cell.Row, cell.Lock = "redis-lua", "redis-lua"
		cell.ID = cell.Row + "/" + cell.Column
		cell.Summarize()
		c.Cells = append(c.Cells, cell)
	}
	add(Cell{Column: "none", Status: CellDone, Runs: []CellRun{{Seed: 1, Dir: "runs/a", Verdict: "safe", FirstViolationNs: -1, Held: 0.93, StartupNs: 25e6, WallNs: 5e9}}})
	add(Cell{Column: "pause", Status: CellDone, Runs: []CellRun{{Seed: 1, Dir: "runs/b", Verdict: "safe", FirstViolationNs: -1, Held: 0.9, Reused: true, WallNs: 5e9}}})
	add(Cell{Column: "failover", Status: CellNA, Reason: "topology redis has no primary with a replica to fail over"})
	add(Cell{Column: "partition", Status: CellSkipped, Reason: "partitions need root"})
	var b strings.Builder
	require.NoError(t, WriteCampaignHTML(&b, c))
	page := b.String()
	require.Contains(t, page, `<a href="runs/b/report.html">safe</a>, reused, 5.00s`)
	require.Contains(t, page, `<a href="runs/a/report.html">safe</a>, 25.0ms, 5.00s`)
	require.Contains(t, page, `<div id="notrun"><h3>Cells not run, and why</h3>`)
	require.Contains(t, page, "<li><code>redis-lua/failover</code> <b>n/a</b>: topology redis has no primary with a replica to fail over</li>")
	require.Contains(t, page, "<li><code>redis-lua/partition</code> <b>skipped</b>: partitions need root</li>")
	require.Contains(t, page, "NOT RUN")
	require.Contains(t, page, "INTERRUPTED")
	require.Contains(t, page, "lock held 93% of the time")
	require.Contains(t, page, `<div class="ts"><span class="k">started</span>2026-11-22T02:10:27Z</div>`)
	require.Contains(t, css, "div.ts { white-space: nowrap;")
}
