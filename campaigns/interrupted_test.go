package campaigns_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
)

// interruptRun writes into dst a copy of the stored run src cut after its
// first lines, ending as harness.Run ends an interrupted run.
func interruptRun(t *testing.T, src, dst string, lines int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	f, err := os.Open(filepath.Join(src, "history.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var last history.Event
	for i := 0; i < lines && sc.Scan(); i++ {
		out.Write(sc.Bytes())
		out.WriteByte('\n')
		require.NoError(t, json.Unmarshal(sc.Bytes(), &last))
	}
	end, err := json.Marshal(history.Event{Seq: last.Seq + 1, Time: last.Time + 1, Type: history.RunEnd, Detail: history.EndedInterrupted})
	require.NoError(t, err)
	out.Write(end)
	out.WriteByte('\n')
	require.NoError(t, os.WriteFile(filepath.Join(dst, "history.jsonl"), out.Bytes(), 0o644))
	if b, err := os.ReadFile(filepath.Join(src, "config.json")); err == nil {
		require.NoError(t, os.WriteFile(filepath.Join(dst, "config.json"), b, 0o644))
	}
}

func recheck(d string) (*checker.Result, error) { return harness.CheckDir(d, nil, true) }

// TestInterruptedRunInStore: an interrupted run says so in its
// results.json and on its page; `locktest report` of a store ignores it
// when a finished run of the same cell and seed exists (the seed is listed
// once), and otherwise shows the cell "interrupted", never a verdict.
func TestInterruptedRunInStore(t *testing.T) {
	dir := copyStore(t)
	// Interrupted early, then run again: run0 sorts before run1.
	run0 := filepath.Join(dir, "redis-lua", "none", "run0")
	interruptRun(t, filepath.Join(dir, "redis-lua", "none", "run1"), run0, 80)

	c, err := campaigns.FromRuns(dir, recheck)
	require.NoError(t, err)
	require.NoError(t, campaigns.WriteReports(dir, c))

	// The run itself: results.json and the page.
	b, err := os.ReadFile(filepath.Join(run0, "results.json"))
	require.NoError(t, err)
	var res checker.Result
	require.NoError(t, json.Unmarshal(b, &res))
	require.True(t, res.Interrupted)
	require.Contains(t, res.Why, "interrupted")
	page, err := os.ReadFile(filepath.Join(run0, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), `<div class="verdict interrupted">INTERRUPTED</div>`)
	require.Contains(t, string(page), `id="interrupted"`)

	// The aggregation: the finished run decides, the seed is listed once.
	cell := c.Cell("redis-lua/none")
	require.Len(t, cell.Runs, 2, "both runs on record")
	require.True(t, cell.Runs[0].Interrupted)
	require.Equal(t, reports.VerdictInterrupted, cell.Runs[0].Verdict)
	require.True(t, cell.Superseded(0))
	require.Equal(t, "safe", cell.Verdict)
	require.Equal(t, 1, c.Runs)
	index, err := os.ReadFile(filepath.Join(dir, campaigns.IndexFile))
	require.NoError(t, err)
	_, rows := matrix(t, index)
	require.Equal(t, "safe", rows["redis-lua"]["none"].class)
	require.Equal(t, 1, strings.Count(cellsRow(t, index, "redis-lua/none"), "seed 1:"), "the seed once")
	require.Contains(t, cellsRow(t, index, "redis-lua/none"), "1 interrupted run(s) of the same seed, re-run: not counted")

	// Without the finished run: "interrupted", not inconclusive.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "redis-lua", "none", "run1")))
	c, err = campaigns.FromRuns(dir, recheck)
	require.NoError(t, err)
	require.NoError(t, campaigns.WriteReports(dir, c))
	cell = c.Cell("redis-lua/none")
	require.Equal(t, reports.VerdictInterrupted, cell.Verdict)
	require.Equal(t, reports.NotRun, cell.Outcome)
	index, err = os.ReadFile(filepath.Join(dir, campaigns.IndexFile))
	require.NoError(t, err)
	_, rows = matrix(t, index)
	require.Equal(t, "interrupted", rows["redis-lua"]["none"].class)
	require.Contains(t, rows["redis-lua"]["none"].text, "interrupted")
	require.NotContains(t, strings.ToLower(rows["redis-lua"]["none"].text), "inconclusive")
	md, err := os.ReadFile(filepath.Join(dir, campaigns.SummaryFile))
	require.NoError(t, err)
	require.Contains(t, string(md), "| `redis-lua` | ⏸ interrupted |")
	junit, err := os.ReadFile(filepath.Join(dir, campaigns.JUnitFile))
	require.NoError(t, err)
	require.Contains(t, string(junit), `<skipped message="interrupted`)
}

// cellsRow is the text of the cells table's row of cell id.
func cellsRow(t *testing.T, page []byte, id string) string {
	t.Helper()
	s := string(page)
	i := strings.Index(s, "<code>"+id+"</code>")
	require.GreaterOrEqual(t, i, 0, id)
	j := strings.Index(s[i:], "</tr>")
	require.GreaterOrEqual(t, j, 0)
	return s[i : i+j]
}

// TestInterruptedCampaignRunResumes: a run interrupted in a campaign is
// kept on record as interrupted (its cell stays pending and shows
// "interrupted"); the resume runs the seed again into a new directory,
// and the finished run decides the cell.
func TestInterruptedCampaignRunResumes(t *testing.T) {
	store := copyStore(t)
	dir := t.TempDir()
	c, err := campaigns.PlanLists(campaigns.Lists{Locks: "redis-lua", Nemeses: "none", Settings: campaigns.Settings{TimeLimit: campaigns.Duration(5 * time.Second)}}, campaigns.Environment{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := filepath.Join(store, "redis-lua", "none", "run1")
	runner := runnerFunc(func(_ context.Context, o harness.Options) (*harness.Outcome, error) {
		d := filepath.Join(o.Store, "redis-lua", "none", "interrupted")
		interruptRun(t, src, d, 80)
		res, err := harness.CheckDir(d, nil, true)
		require.NoError(t, err)
		cancel() // Ctrl-C
		return &harness.Outcome{Dir: d, Result: *res, Interrupted: true, Startup: 1500 * time.Millisecond}, nil
	})
	require.NoError(t, campaigns.Run(ctx, c, campaigns.Options{Dir: dir, Runner: runner}))
	require.True(t, c.Interrupted)
	cell := c.Cell("redis-lua/none")
	require.Equal(t, reports.CellPending, cell.Status)
	require.Len(t, cell.Runs, 1)
	require.True(t, cell.Runs[0].Interrupted)
	require.Equal(t, reports.VerdictInterrupted, cell.Verdict)
	require.Equal(t, 1, c.ClusterStarts, "the interrupted run started a cluster")
	index, err := os.ReadFile(filepath.Join(dir, campaigns.IndexFile))
	require.NoError(t, err)
	_, rows := matrix(t, index)
	require.Equal(t, "interrupted", rows["redis-lua"]["none"].class)
	// No cell ran: a neutral header, not a green "as expected".
	require.Contains(t, string(index), `<header class="campaign neutral" id="top">`)
	require.Contains(t, string(index), `<div class="why" id="status">interrupted: 0 of 1 cells ran</div>`)
	require.NotContains(t, string(index), "as expected")
	md, err := os.ReadFile(filepath.Join(dir, campaigns.SummaryFile))
	require.NoError(t, err)
	require.Contains(t, string(md), ": interrupted: 0 of 1 cells ran\n")

	// Resume: the same seed again, into a new directory.
	c, err = campaigns.Load(dir)
	require.NoError(t, err)
	var seeds []int64
	runner = runnerFunc(func(_ context.Context, o harness.Options) (*harness.Outcome, error) {
		seeds = append(seeds, o.Seed)
		d := filepath.Join(o.Store, "redis-lua", "none", "finished")
		require.NoError(t, os.MkdirAll(d, 0o755))
		for _, f := range []string{"history.jsonl", "config.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(d, f), b, 0o644))
		}
		res, err := harness.CheckDir(d, nil, true)
		require.NoError(t, err)
		return &harness.Outcome{Dir: d, Result: *res}, nil
	})
	require.NoError(t, campaigns.Run(context.Background(), c, campaigns.Options{Dir: dir, Runner: runner}))
	require.Equal(t, []int64{1}, seeds)
	cell = c.Cell("redis-lua/none")
	require.Equal(t, reports.CellDone, cell.Status)
	require.Len(t, cell.Runs, 2, "the interrupted run stays on record")
	require.True(t, cell.Superseded(0))
	require.Equal(t, "safe", cell.Verdict)
	require.FileExists(t, filepath.Join(dir, cell.Runs[0].Dir, "history.jsonl"), "nothing recorded is deleted")
	index, err = os.ReadFile(filepath.Join(dir, campaigns.IndexFile))
	require.NoError(t, err)
	require.Contains(t, string(index), `<header class="campaign good" id="top">`)
	require.Equal(t, 1, c.ClusterStarts, "the interrupted run started the only cluster")

	// `locktest report` of the campaign, and of its runs as a store.
	require.NoError(t, campaigns.Refresh(dir, c, recheck))
	require.Equal(t, "safe", c.Cell("redis-lua/none").Verdict)
	st, err := campaigns.FromRuns(filepath.Join(dir, campaigns.RunsDir), recheck)
	require.NoError(t, err)
	require.Equal(t, "safe", st.Cell("redis-lua/none").Verdict)
}

type runnerFunc func(context.Context, harness.Options) (*harness.Outcome, error)

func (f runnerFunc) Run(ctx context.Context, o harness.Options) (*harness.Outcome, error) {
	return f(ctx, o)
}

// A run whose check was stopped (a Ctrl-C during the check at the end of
// the run) decided nothing: its cell run is interrupted, as a cut workload
// is, not an inconclusive (or safe) verdict that a resume would keep.
func TestFillRunCheckInterrupted(t *testing.T) {
	cases := []struct {
		name        string
		res         checker.Result
		interrupted bool
		verdict     string
	}{
		{"check stopped", checker.Result{Verdict: checker.Inconclusive, Why: "linearizable interrupted", CheckInterrupted: true}, true, reports.VerdictInterrupted},
		{"check stopped after a proof", checker.Result{Verdict: checker.Unsafe, Why: "double holder", CheckInterrupted: true}, true, reports.VerdictInterrupted},
		{"check finished", checker.Result{Verdict: checker.Safe, Why: "no anomaly"}, false, string(checker.Safe)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var run reports.CellRun
			campaigns.FillRun(&run, &tc.res)
			require.Equal(t, tc.interrupted, run.Interrupted)
			require.Equal(t, tc.verdict, run.Verdict)
		})
	}
}
