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
