package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/campaigns"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/reports"
)

// shardConfig is a campaign of 4 lock variants under up to 4 faults, 3
// runs per cell: cells of several pool groups (plain redis, redis with the
// network layer, zk3, the MySQL failover that starts its own cluster).
const shardConfig = `name: sharded
runs: 3
defaults: {time_limit: 2s}
cells:
  - lock: redis-lua
    expect: {none: safe, pause: unsafe, kill: safe, crash-client: safe}
  - lock: redis-setnx
    expect: {none: safe, pause: unsafe, crash-client: either}
  - lock: zk
    expect: {none: safe, pause: unsafe, kill: safe}
  - lock: mysql-get-lock
    expect: {none: safe, failover: either}
`

// stubVerdict is the verdict of one run by lock, fault and seed: fixed,
// so that a campaign run whole or in shards sees the same verdicts. One
// cell is unsafe on its third seed only, one differs from its
// expectation on its second seed only (redis-lua/kill: safe expected).
func stubVerdict(lock, nem string, seed int64) checker.Verdict {
	switch {
	case nem == "pause":
		if lock == "zk" && seed != 3 {
			return checker.Safe
		}
		return checker.Unsafe
	case lock == "redis-lua" && nem == "kill" && seed == 2:
		return checker.Unsafe
	case lock == "redis-setnx" && nem == "crash-client":
		return checker.Unsafe
	}
	return checker.Safe
}

// stubShardRunner records every run it is asked for (cell and seed) and
// answers stubVerdict, writing a run directory per seed.
type stubShardRunner struct {
	mu   sync.Mutex
	runs []string
}

func (s *stubShardRunner) Run(_ context.Context, o harness.Options) (*harness.Outcome, error) {
	s.mu.Lock()
	s.runs = append(s.runs, fmt.Sprintf("%s/%s seed %d", o.Lock, o.Nemesis, o.Seed))
	s.mu.Unlock()
	dir := filepath.Join(o.Store, o.Lock, o.Nemesis, fmt.Sprintf("seed-%d", o.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.html"), []byte(o.Command), 0o644); err != nil {
		return nil, err
	}
	v := stubVerdict(o.Lock, o.Nemesis, o.Seed)
	res := checker.Result{Verdict: v, Lock: o.Lock, FirstViolation: -1, Counts: checker.Counts{Acquires: 10, AcquiresOK: 7, DurationNs: int64(2 * time.Second), HeldNs: int64(time.Second)}}
	if v == checker.Unsafe {
		res.FirstViolation = int64(time.Second) + o.Seed
		res.Anomalies = []checker.Anomaly{{Kind: checker.KindDoubleHolder, Severity: checker.SeverityViolation}}
	}
	return &harness.Outcome{Dir: dir, Result: res, Startup: 10 * time.Millisecond}, nil
}

// execIn runs a locktest command built by newCmd in this process, as
// main would: it returns the exit code and the output, ending with the
// error line main prints.
func execIn(t *testing.T, newCmd func() *cobra.Command, args ...string) (int, string) {
	t.Helper()
	return execInCtx(context.Background(), t, newCmd, args...)
}

// execInCtx is execIn with a context to cancel (Ctrl-C).
func execInCtx(ctx context.Context, t *testing.T, newCmd func() *cobra.Command, args ...string) (int, string) {
	t.Helper()
	c := newCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(io.Discard)
	c.SetArgs(args)
	err := c.ExecuteContext(ctx)
	var ec exitCode
	switch {
	case errors.As(err, &ec):
		if ec.err != nil {
			out.WriteString("locktest: " + ec.err.Error() + "\n")
		}
		return ec.code, out.String()
	case err != nil:
		return exitError, out.String() + "locktest: " + err.Error() + "\n"
	}
	return 0, out.String()
}

// stubCampaign sets a stub runner and a machine that can run everything
// (or, with netErr, none of the network faults) for the test.
func stubCampaign(t *testing.T, r campaigns.Runner) {
	t.Helper()
	origRunner, origProbe := campaignRunner, probeCampaign
	t.Cleanup(func() { campaignRunner, probeCampaign = origRunner, origProbe })
	campaignRunner = r
	probeCampaign = func(_ context.Context, cluster string) (campaigns.Environment, error) {
		return campaigns.Environment{Cluster: cluster}, nil
	}
}

// matrixOf is what a campaign's matrix and verdicts are made of: every
// cell in order with its status, reason, verdict, outcome, counts, and
// every run's seed and verdict; nothing of where or when it ran.
func matrixOf(c *reports.Campaign) []string {
	var out []string
	for _, cell := range c.Cells {
		line := fmt.Sprintf("%s status=%s verdict=%s outcome=%s expect=%s anomalies=%v first=%d held=%.3f reason=%q runs=",
			cell.ID, cell.Status, cell.Verdict, cell.Outcome, cell.Expect, cell.Anomalies, cell.FirstViolationNs, cell.Held, cell.Reason)
		for _, r := range cell.Runs {
			line += fmt.Sprintf("[%d %s %s]", r.Seed, r.Verdict, r.Dir)
		}
		out = append(out, line)
	}
	return out
}

var shardPrefix = regexp.MustCompile(`shard-\d+/`)

// TestShardsMergeAsWhole: a campaign run whole and as 3 shards merged has
// the same cells, runs and seeds, matrix, summary.md, JUnit verdicts and
// exit code; every run ran once, in one shard; each shard writes its
// shard.json (TestSplitShard checks how runs are shared out).
func TestShardsMergeAsWhole(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(shardConfig), 0o644))
	tmp := t.TempDir()

	whole := &stubShardRunner{}
	stubCampaign(t, whole)
	wholeDir := filepath.Join(tmp, "whole")
	wholeCode, out := execIn(t, newCampaignCmd, "--config", cfg, "--dir", wholeDir, "--quiet")
	require.Equal(t, exitUnsafe, wholeCode, out) // redis-lua/kill differs on seed 2

	sharded := &stubShardRunner{}
	campaignRunner = sharded
	var dirs []string
	perShard := map[int][]string{}
	for k := 1; k <= 3; k++ {
		d := filepath.Join(tmp, fmt.Sprintf("s%d", k))
		dirs = append(dirs, d)
		before := len(sharded.runs)
		code, out := execIn(t, newCampaignCmd, "--config", cfg, "--dir", d, "--quiet", "--shard", fmt.Sprintf("%d/3", k))
		require.Contains(t, []int{exitSafe, exitUnsafe}, code, out)
		require.Contains(t, out, fmt.Sprintf("shard %d/3 of campaign plan ", k))
		perShard[k] = sharded.runs[before:]
		sh, err := campaigns.LoadShard(d)
		require.NoError(t, err)
		require.Equal(t, k, sh.K)
		require.Equal(t, 3, sh.N)
		require.Equal(t, harness.Version, sh.Version)
		require.NotEmpty(t, sh.Finished)
		require.Len(t, sh.Ran, len(sh.Cells), "every cell of the share ran")
		require.Empty(t, sh.Skipped)
	}
	// Every run exactly once, the same seeds as the whole campaign.
	require.ElementsMatch(t, whole.runs, sharded.runs)
	require.Len(t, whole.runs, 12*3)
	for k, runs := range perShard {
		require.NotEmpty(t, runs, "shard %d ran nothing: the split is not balanced", k)
	}
	mergeDir := filepath.Join(tmp, "merged")
	// Shards in any order.
	code, out := execIn(t, newReportCmd, append([]string{"--merge", mergeDir}, dirs[2], dirs[0], dirs[1])...)
	require.Equal(t, wholeCode, code, out)
	require.Contains(t, out, "report: "+filepath.Join(mergeDir, "index.html")+" (12 cells from 3 shards)")

	w, err := reports.ReadCampaign(filepath.Join(wholeDir, campaigns.ResultsFile))
	require.NoError(t, err)
	m, err := reports.ReadCampaign(filepath.Join(mergeDir, campaigns.ResultsFile))
	require.NoError(t, err)
	require.Equal(t, w.Rows, m.Rows)
	require.Equal(t, w.Columns, m.Columns)
	require.Equal(t, w.Seed, m.Seed)
	require.Equal(t, w.Runs, m.Runs)
	require.Equal(t, w.Name, m.Name)
	require.Equal(t, w.Differs(), m.Differs())
	require.Equal(t, w.StartupNs, m.StartupNs)
	require.Equal(t, w.ClusterStarts+w.ClusterReuses, m.ClusterStarts+m.ClusterReuses)
	// The runs live in the merged directory's shard-K/runs.
	mm := matrixOf(m)
	for i := range mm {
		mm[i] = shardPrefix.ReplaceAllString(mm[i], "")
	}
	require.Equal(t, matrixOf(w), mm)
	for _, cell := range m.Cells {
		for _, r := range cell.Runs {
			require.FileExists(t, filepath.Join(mergeDir, r.Dir, "report.html"))
		}
	}
	// summary.md: the same text (run links carry the shard's directory).
	ws, err := os.ReadFile(filepath.Join(wholeDir, campaigns.SummaryFile))
	require.NoError(t, err)
	ms, err := os.ReadFile(filepath.Join(mergeDir, campaigns.SummaryFile))
	require.NoError(t, err)
	require.Contains(t, string(ms), "redis-lua/kill")
	// The wall time is measured, not decided: the whole campaign's is its
	// own, the merge's the slowest shard's (they ran side by side); on a
	// busy machine they differ by whole seconds.
	require.Equal(t, time.Duration(slowestShard(t, dirs)).Round(time.Second).String(), summaryWall(t, ms))
	require.Equal(t, time.Duration(w.WallNs).Round(time.Second).String(), summaryWall(t, ws))
	require.Equal(t, wallTime.ReplaceAllString(string(ws), ""), wallTime.ReplaceAllString(shardPrefix.ReplaceAllString(string(ms), ""), ""))
	// junit.xml: the same cases, failures and skips.
	wj, err := os.ReadFile(filepath.Join(wholeDir, campaigns.JUnitFile))
	require.NoError(t, err)
	mj, err := os.ReadFile(filepath.Join(mergeDir, campaigns.JUnitFile))
	require.NoError(t, err)
	times := regexp.MustCompile(`time="[0-9.]+"`)
	require.Equal(t, times.ReplaceAllString(string(wj), ""), times.ReplaceAllString(shardPrefix.ReplaceAllString(string(mj), ""), ""))
	// The matrix page: the same cells with the same classes.
	wi, err := os.ReadFile(filepath.Join(wholeDir, campaigns.IndexFile))
	require.NoError(t, err)
	mi, err := os.ReadFile(filepath.Join(mergeDir, campaigns.IndexFile))
	require.NoError(t, err)
	matrixTable := regexp.MustCompile(`(?s)<table class="matrix">.*?</table>`)
	require.NotEmpty(t, matrixTable.Find(wi))
	require.Equal(t, string(matrixTable.Find(wi)), shardPrefix.ReplaceAllString(string(matrixTable.Find(mi)), ""))

	// Merging again into the same directory is fine; into a directory
	// with other files it is refused.
	code, out = execIn(t, newReportCmd, append([]string{"--merge", mergeDir}, dirs...)...)
	require.Equal(t, wholeCode, code, out)
	code, out = execIn(t, newReportCmd, append([]string{"--merge", wholeDir}, dirs...)...)
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "neither empty nor an earlier merge")
}

// wallTime is the measured wall time in summary.md's first lines.
var wallTime = regexp.MustCompile(`wall time (\S+) \(`)

// summaryWall returns the wall time a summary.md states.
func summaryWall(t *testing.T, summary []byte) string {
	t.Helper()
	m := wallTime.FindSubmatch(summary)
	require.NotNil(t, m, "no wall time in %s", summary)
	return string(m[1])
}

// slowestShard returns the longest wall time of the shards' results.json.
func slowestShard(t *testing.T, dirs []string) int64 {
	t.Helper()
	var slowest int64
	for _, d := range dirs {
		c, err := reports.ReadCampaign(filepath.Join(d, campaigns.ResultsFile))
		require.NoError(t, err)
		slowest = max(slowest, c.WallNs)
	}
	return slowest
}

// makeShards runs the 3 shards of config cfg with the stub runner into
// tmp/s1..s3 and returns their directories.
func makeShards(t *testing.T, cfg, tmp string) []string {
	t.Helper()
	var dirs []string
	for k := 1; k <= 3; k++ {
		d := filepath.Join(tmp, fmt.Sprintf("s%d", k))
		code, out := execIn(t, newCampaignCmd, "--config", cfg, "--dir", d, "--quiet", "--shard", fmt.Sprintf("%d/3", k))
		require.Contains(t, []int{exitSafe, exitUnsafe}, code, out)
		dirs = append(dirs, d)
	}
	return dirs
}

// editJSON rewrites the JSON file path through f.
func editJSON(t *testing.T, path string, f func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	f(m)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// copyDir copies a shard directory's JSON files (enough for a merge to
// read it) to a new directory.
func copyShardDir(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o755))
	for _, f := range []string{campaigns.ShardFile, campaigns.StateFile} {
		b, err := os.ReadFile(filepath.Join(from, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, f), b, 0o644))
	}
}

// TestMergeRefuses: a merge of shards that do not make one campaign is
// refused with one line on stderr and exit 2, writing nothing.
func TestMergeRefuses(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(shardConfig), 0o644))
	stubCampaign(t, &stubShardRunner{})
	dirs := makeShards(t, cfg, filepath.Join(tmp, "a"))

	// Shard 2 of the same campaign with another seed: another config.
	other := filepath.Join(tmp, "other.yaml")
	require.NoError(t, os.WriteFile(other, []byte(strings.Replace(shardConfig, "runs: 3", "runs: 3\nseed: 7", 1)), 0o644))
	otherDir := filepath.Join(tmp, "other2")
	code, out := execIn(t, newCampaignCmd, "--config", other, "--dir", otherDir, "--quiet", "--shard", "2/3")
	require.Contains(t, []int{exitSafe, exitUnsafe}, code, out)
	// The same campaign in 2 shards.
	twoDir := filepath.Join(tmp, "two1")
	code, out = execIn(t, newCampaignCmd, "--config", cfg, "--dir", twoDir, "--quiet", "--shard", "1/2")
	require.Contains(t, []int{exitSafe, exitUnsafe}, code, out)

	// Another version: shard 3 as a newer locktest would have run it.
	newer := filepath.Join(tmp, "newer3")
	copyShardDir(t, dirs[2], newer)
	editJSON(t, filepath.Join(newer, campaigns.ShardFile), func(m map[string]any) { m["version"] = "v9.9.9" })
	// A run twice: shard 3 also claims the first cell of shard 1.
	twice := filepath.Join(tmp, "twice3")
	copyShardDir(t, dirs[2], twice)
	s1, err := campaigns.LoadShard(dirs[0])
	require.NoError(t, err)
	editJSON(t, filepath.Join(twice, campaigns.ShardFile), func(m map[string]any) {
		m["cells"] = append(m["cells"].([]any), map[string]any{"ordinal": s1.Cells[0].Ordinal, "id": s1.Cells[0].ID, "seeds": s1.Cells[0].Seeds})
	})
	// Unfinished: shard 3 interrupted.
	cut := filepath.Join(tmp, "cut3")
	copyShardDir(t, dirs[2], cut)
	editJSON(t, filepath.Join(cut, campaigns.StateFile), func(m map[string]any) { m["finished"] = ""; m["interrupted"] = true })
	// A whole campaign is no shard.
	whole := filepath.Join(tmp, "whole")
	code, out = execIn(t, newCampaignCmd, "--config", cfg, "--dir", whole, "--quiet")
	require.Contains(t, []int{exitSafe, exitUnsafe}, code, out)

	cases := []struct {
		name string
		dirs []string
		want string
	}{
		{"missing shard", []string{dirs[0], dirs[2]}, "shard 2/3 missing (given 2 of 3 shards)"},
		{"shard given twice", []string{dirs[0], dirs[1], dirs[1], dirs[2]}, "shard 2/3 given twice: " + dirs[1] + " and " + dirs[1]},
		{"shard of another config", []string{dirs[0], otherDir, dirs[2]}, otherDir + " is a shard of another campaign config"},
		{"shard of another split", []string{dirs[0], twoDir, dirs[2]}, twoDir + " is shard 1/2, " + dirs[0] + " is shard 1/3: shards must split the campaign alike"},
		{"shard of another version", []string{dirs[0], dirs[1], newer}, newer + " ran locktest v9.9.9"},
		{"run twice", []string{dirs[0], dirs[1], twice}, fmt.Sprintf("cell %s seed %d is in shard 1/3 and shard 3/3: a run twice", s1.Cells[0].ID, s1.Cells[0].Seeds[0])},
		{"unfinished shard", []string{dirs[0], dirs[1], cut}, "shard 3/3 in " + cut + " did not finish (go on with `locktest campaign --resume " + cut + "`)"},
		{"not a shard", []string{dirs[0], dirs[1], whole}, whole + ": not a shard directory (no shard.json)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outDir := filepath.Join(t.TempDir(), "merged")
			r := run(t, nil, append([]string{"report", "--merge", outDir}, tc.dirs...)...)
			require.Equal(t, exitError, r.code, r.stdout+r.stderr)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			require.True(t, strings.HasPrefix(r.stderr, "locktest: merge: "+tc.want), r.stderr)
			require.NoDirExists(t, outDir)
		})
	}
	// The three right ones merge.
	r := run(t, nil, append([]string{"report", "--merge", filepath.Join(tmp, "ok")}, dirs...)...)
	require.Equal(t, exitUnsafe, r.code, r.stdout+r.stderr)
}

// TestShardFlag: bad --shard values are one line and exit 2; --resume
// keeps the shard it resumes and refuses another.
func TestShardFlag(t *testing.T) {
	for _, v := range []string{"0/2", "3/2", "x", "2/0", "1/2/3", "-1/2", "1/1001"} {
		r := run(t, nil, "campaign", "--locks", "redis-lua", "--nemeses", "none", "--shard", v, "--dir", t.TempDir())
		require.Equal(t, exitError, r.code, v)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
		require.Contains(t, r.stderr, "locktest: --shard ", v)
	}

	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(shardConfig), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	stub := &stubShardRunner{}
	stubCampaign(t, runnerFunc(func(c context.Context, o harness.Options) (*harness.Outcome, error) {
		n++
		if n == 3 {
			cancel() // Ctrl-C during the third run of the shard
			return &harness.Outcome{Interrupted: true}, nil
		}
		return stub.Run(c, o)
	}))
	dir := filepath.Join(tmp, "s2")
	code, out := execInCtx(ctx, t, newCampaignCmd, "--config", cfg, "--dir", dir, "--quiet", "--shard", "2/3")
	require.Equal(t, exitInterrupted, code, out)
	sh, err := campaigns.LoadShard(dir)
	require.NoError(t, err)
	require.Empty(t, sh.Finished)

	code, out = execIn(t, newCampaignCmd, "--resume", dir, "--shard", "1/3", "--quiet")
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "resume: "+dir+" is shard 2/3, not 1/3")

	campaignRunner = stub
	code, out = execIn(t, newCampaignCmd, "--resume", dir, "--quiet")
	require.Contains(t, []int{exitSafe, exitUnsafe}, code, out)
	after, err := campaigns.LoadShard(dir)
	require.NoError(t, err)
	require.Equal(t, sh.Cells, after.Cells)
	require.NotEmpty(t, after.Finished)
	// The shard ran its share and nothing else: each of its runs once.
	var want []string
	for _, sc := range sh.Cells {
		for _, seed := range sc.Seeds {
			want = append(want, sc.ID+" seed "+fmt.Sprint(seed))
		}
	}
	got := map[string]int{}
	for _, r := range stub.runs {
		got[r]++
	}
	st, err := campaigns.Load(dir)
	require.NoError(t, err)
	var have []string
	for _, cell := range st.Cells {
		require.Equal(t, reports.CellDone, cell.Status, cell.ID)
		for _, r := range cell.Runs {
			have = append(have, cell.ID+" seed "+fmt.Sprint(r.Seed))
		}
	}
	require.ElementsMatch(t, want, have)
	for r, k := range got {
		require.Equal(t, 1, k, r)
	}
	// The run cut by Ctrl-C recorded nothing and ran again on resume.
	require.Len(t, stub.runs, len(want))
	require.Equal(t, 3, n)
}

// TestMergeShowsSkippedShard: a shard whose machine lacks the servers of
// a cell skips it; the merge shows the cell skipped, saying on which
// shard, and the cell with an expectation differs (exit 1).
func TestMergeShowsSkippedShard(t *testing.T) {
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(shardConfig), 0o644))
	stubCampaign(t, &stubShardRunner{})
	// The shard that holds zk cells runs on a machine without ZooKeeper.
	conf, err := campaigns.LoadConfig(cfg)
	require.NoError(t, err)
	plan, err := campaigns.PlanConfig(conf, campaigns.Environment{Cluster: campaigns.ClusterLocal})
	require.NoError(t, err)
	noZK := 0
	for k := 1; k <= 3 && noZK == 0; k++ {
		_, sh, err := campaigns.SplitShard(plan, k, 3)
		require.NoError(t, err)
		for _, sc := range sh.Cells {
			if strings.HasPrefix(sc.ID, "zk/") {
				noZK = k
			}
		}
	}
	require.NotZero(t, noZK)
	var dirs []string
	for k := 1; k <= 3; k++ {
		probeCampaign = func(_ context.Context, cluster string) (campaigns.Environment, error) {
			env := campaigns.Environment{Cluster: cluster}
			if k == noZK { // no ZooKeeper on this machine
				env.Missing = func(topology string) []clusters.Requirement {
					if topology == "zk3" {
						return []clusters.Requirement{{Binary: "zkServer.sh", Package: "zookeeperd"}}
					}
					return nil
				}
			}
			return env, nil
		}
		d := filepath.Join(tmp, fmt.Sprintf("s%d", k))
		code, out := execIn(t, newCampaignCmd, "--config", cfg, "--dir", d, "--quiet", "--shard", fmt.Sprintf("%d/3", k))
		require.Contains(t, []int{exitSafe, exitUnsafe}, code, out)
		dirs = append(dirs, d)
	}
	sh2, err := campaigns.LoadShard(dirs[noZK-1])
	require.NoError(t, err)
	var zkHere []string
	for _, sc := range sh2.Cells {
		if strings.HasPrefix(sc.ID, "zk/") {
			zkHere = append(zkHere, sc.ID)
		}
	}
	require.NotEmpty(t, zkHere)
	var skipped []string
	for _, s := range sh2.Skipped {
		skipped = append(skipped, s.ID)
		require.Contains(t, s.Reason, "zookeeper")
	}
	require.ElementsMatch(t, zkHere, skipped)

	out := filepath.Join(tmp, "merged")
	r := run(t, nil, append([]string{"report", "--merge", out}, dirs...)...)
	require.Equal(t, exitUnsafe, r.code, r.stdout+r.stderr)
	on := fmt.Sprintf("on shard %d/3 (", noZK)
	require.Contains(t, r.stdout, fmt.Sprintf("shard %d/3 (%s", noZK, dirs[noZK-1]))
	m, err := reports.ReadCampaign(filepath.Join(out, campaigns.ResultsFile))
	require.NoError(t, err)
	for _, id := range zkHere {
		cell := m.Cell(id)
		require.Equal(t, reports.CellSkipped, cell.Status, id)
		require.True(t, strings.HasPrefix(cell.Reason, on), cell.Reason)
		require.Equal(t, reports.Differs, cell.Outcome, id)
	}
	md, err := os.ReadFile(filepath.Join(out, campaigns.SummaryFile))
	require.NoError(t, err)
	require.Contains(t, string(md), "skipped: "+on)
}
