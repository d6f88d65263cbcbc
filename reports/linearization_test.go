package reports

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/lostgen"
)

// storedRun is a real stored run: redis-lua under pause, 9 double holders
// (lease expired), linearizable.
const storedRun = "../campaigns/testdata/store/redis-lua/pause/run1/history.jsonl"

// external matches a reference to anything outside the page (as the
// browser test's).
var external = regexp.MustCompile(`(?i)(src|href|action|srcset|poster|data)\s*=\s*["']?\s*(https?:|//|ftp:|ws:)|url\(\s*["']?\s*(https?:|//)|@import|<link\b|<script[^>]+src`)

func loadChecked(t *testing.T, path string) (*history.History, *checker.Result) {
	t.Helper()
	h, err := history.Load(path)
	require.NoError(t, err)
	r := checker.Check(h, checker.DefaultOptions())
	return h, &r
}

// visData is the data porcupine's page draws: its operations and the
// annotations.
type visData struct {
	Partitions []struct {
		History []struct {
			ClientId    int
			Description string
			Metadata    string
		}
	}
	Annotations []struct {
		Tag, Description, Details string
		BackgroundColor           string
	}
}

func readVisData(t *testing.T, page string) visData {
	t.Helper()
	const marker = "const data = "
	i := strings.Index(page, marker)
	require.GreaterOrEqual(t, i, 0, "no data in the page")
	rest := page[i+len(marker):]
	var d visData
	require.NoError(t, json.NewDecoder(strings.NewReader(rest)).Decode(&d))
	return d
}

func TestLinearizationOfStoredRun(t *testing.T) {
	h, r := loadChecked(t, storedRun)
	require.Equal(t, checker.Unsafe, r.Verdict)
	var buf bytes.Buffer
	lv, err := WriteLinearization(&buf, h, r, LinearizationLimits{})
	require.NoError(t, err)
	page := buf.String()

	require.Equal(t, LinearizationFile, lv.Link)
	require.Equal(t, "linearizable", lv.Result)
	require.Equal(t, "pass", lv.ResultClass)
	require.False(t, lv.Partial)
	require.Contains(t, lv.Scope, "the whole run")
	require.Equal(t, len(h.Faults), lv.Faults)
	require.Equal(t, len(r.Anomalies), lv.Anomalies)

	// Self-contained, with the banner, the title and every patch.
	require.NotRegexp(t, external, page)
	require.Contains(t, page, `<div id="locktest">`)
	require.Contains(t, page, "<title>locktest linearization: redis-lua under pause (seed 1)</title>")
	require.Contains(t, page, `href="report.html"`)
	require.Contains(t, page, "Shown: the whole run")
	require.NotContains(t, page, jumpOnLoad, "a linearizable view has no error to jump to")
	for _, p := range linPatches {
		require.NotContains(t, page, p.old, "porcupine's page changed: a patch no longer applies")
		require.Contains(t, page, p.new)
	}

	// Every fault as an annotation, the anomalies with their cause, every
	// operation with its times.
	d := readVisData(t, page)
	tags := map[string]int{}
	for _, a := range d.Annotations {
		tags[a.Tag]++
	}
	for _, f := range h.Faults {
		require.Positive(t, tags["fault: "+f.Name+" "+f.Target], "fault %s %s not annotated", f.Name, f.Target)
	}
	doubles := 0
	for _, a := range r.Anomalies {
		if a.Kind == checker.KindDoubleHolder {
			doubles++
		}
	}
	require.Positive(t, doubles)
	require.Equal(t, doubles, tags["checker: double-holder"])
	var sawCause bool
	for _, a := range d.Annotations {
		if a.Tag == "checker: double-holder" {
			require.Contains(t, a.Description, "(lease-expired)")
			sawCause = sawCause || strings.Contains(a.Details, "Cause: lease expired (by design)")
		}
	}
	require.True(t, sawCause)
	require.Len(t, d.Partitions, 1)
	ops := d.Partitions[0].History
	require.Len(t, ops, lv.Ops)
	for _, o := range ops {
		require.Regexp(t, `^(acquire|release): (ok|held|not-owner|indeterminate)$`, o.Description)
		require.Regexp(t, `^op \d+, client \d: (acquire|release)`, o.Metadata)
	}
}

func TestLinearizationNotLinearizable(t *testing.T) {
	h, r := loadChecked(t, "../checker/testdata/bad-nonlinearizable.jsonl")
	var buf bytes.Buffer
	lv, err := WriteLinearization(&buf, h, r, LinearizationLimits{})
	require.NoError(t, err)
	require.Equal(t, "not linearizable", lv.Result)
	require.Equal(t, "fail", lv.ResultClass)
	page := buf.String()
	require.Contains(t, page, `<span class="res" id="lin-result">not linearizable</span>`)
	require.Contains(t, page, "jump to first error")
	require.Contains(t, page, jumpAnchor+jumpOnLoad, "the page does not open on the failing part")
	d := readVisData(t, page)
	var tags []string
	for _, a := range d.Annotations {
		tags = append(tags, a.Tag)
	}
	require.Contains(t, tags, "checker: non-linearizable")
}

// longHistory: 300 clean cycles, then client 2 granted the lock while
// client 1 holds it, then 100 more cycles; no lease.
func longHistory(t *testing.T) *history.History {
	info := defaultInfo()
	info.Lease, info.TTLMillis = false, 0
	b := newBuilder(t, info)
	t0 := 0.1
	cycle := func(c int) {
		tok := int64(b.opID + 1)
		b.op(c, history.Acquire, t0, t0+0.002, history.OK, withToken(tok))
		b.op(c, history.Release, t0+0.004, t0+0.006, history.OK, func(inv, _ *history.Event) { inv.Owner = "owner-" + itoa(tok) })
		t0 += 0.01
	}
	for k := range 300 {
		cycle(1 + k%2)
	}
	b.faultAt("pause", "client 1", t0, t0+0.05)
	b.op(1, history.Acquire, t0, t0+0.002, history.OK, withToken(9001))
	b.op(2, history.Acquire, t0+0.01, t0+0.012, history.OK, withToken(9002))
	b.op(2, history.Release, t0+0.02, t0+0.022, history.OK, func(inv, _ *history.Event) { inv.Owner = "owner-9002" })
	b.op(1, history.Release, t0+0.03, t0+0.032, history.OK, func(inv, _ *history.Event) { inv.Owner = "owner-9001" })
	t0 += 0.05
	for k := range 100 {
		cycle(1 + k%2)
	}
	return b.build(t0 + 0.1)
}

func TestLinearizationWindow(t *testing.T) {
	h := longHistory(t)
	r := checker.Check(h, checker.DefaultOptions())
	require.Equal(t, checker.Unsafe, r.Verdict)
	var buf bytes.Buffer
	lv, err := WriteLinearization(&buf, h, &r, LinearizationLimits{MaxOps: 60, Timeout: 5 * time.Second})
	require.NoError(t, err)
	require.True(t, lv.Partial)
	require.LessOrEqual(t, lv.Ops, 60)
	require.Contains(t, lv.Scope, "a window of")
	require.Contains(t, lv.Scope, "of the 804 lock operations")
	require.Contains(t, lv.Scope, "s, where the lock was surely free, to ")
	require.Contains(t, lv.Scope, "the rest of the run is not shown")
	require.Equal(t, "not linearizable", lv.Result, "the window must show the failing part")
	require.Equal(t, 1, lv.Faults)
	page := buf.String()
	require.Contains(t, page, `<p class="partial" id="lin-scope">Shown: a window of`)

	// No anomaly to aim at: the start of the run, said so.
	r2 := r
	r2.Anomalies = nil
	buf.Reset()
	lv, err = WriteLinearization(&buf, h, &r2, LinearizationLimits{MaxOps: 60})
	require.NoError(t, err)
	require.True(t, lv.Partial)
	require.Contains(t, lv.Scope, "the first ")
	require.Equal(t, "linearizable", lv.Result)
	require.Contains(t, strings.Join(lv.Notes, " "), "the part that fails is outside this window")
	require.Equal(t, 0, lv.Faults, "the fault is outside the window")
}

func TestWriteRunDir(t *testing.T) {
	h, r := loadChecked(t, storedRun)
	dir := t.TempDir()
	// A run's settings: what locktest shrink needs to run it again.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"options": {"lock": "redis-lua"}}`), 0o644))
	require.NoError(t, WriteRunDir(dir, h, r))
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	lin, err := os.ReadFile(filepath.Join(dir, LinearizationFile))
	require.NoError(t, err)
	require.NotRegexp(t, external, string(lin))
	s := string(page)
	has(t, s, `<a class="linlink" href="linearization.html">`)
	has(t, s, `<a href="#linearization">Linearization</a>`)
	has(t, s, "Shown: the whole run: all ")
	// The checker's causes and search, in plain words.
	has(t, s, `<span class="badge cause"`)
	has(t, s, "<b>cause: lease expired (by design)</b>")
	require.Regexp(t, `<title>#1 double-holder \(violation\), clients [^<]*; cause: lease expired \(by design\)</title>`, s)
	require.Regexp(t, `Decided exactly, with one way to place the operation: \d+ of \d+ returns \(\d+\.\d%\)`, s)
	has(t, s, "The search bound (4096 configurations) was not hit.")
	// An unsafe run's report says how to shrink it.
	require.Equal(t, checker.Unsafe, r.Verdict)
	has(t, s, `<b>Shrink this run</b>`)
	has(t, s, "<code>locktest shrink "+dir+"</code>")
	// A directory with a space: the command is quoted for the shell.
	spaced := filepath.Join(t.TempDir(), "my runs", "it's run1")
	require.NoError(t, os.MkdirAll(spaced, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(spaced, "config.json"), []byte(`{"options": {"lock": "redis-lua"}}`), 0o644))
	cmd := ShrinkCommand(spaced)
	require.Equal(t, "locktest shrink '"+strings.ReplaceAll(spaced, "'", `'\''`)+"'", cmd)
	// The shell reads the directory back whole, as one word.
	word, err := exec.Command("sh", "-c", "printf '%s' "+strings.TrimPrefix(cmd, "locktest shrink ")).Output()
	require.NoError(t, err)
	require.Equal(t, spaced, string(word))
	// A history checked alone (no config.json) cannot be run again: no
	// hint that would be refused.
	bare := t.TempDir()
	require.NoError(t, WriteRunDir(bare, h, r))
	page, err = os.ReadFile(filepath.Join(bare, "report.html"))
	require.NoError(t, err)
	require.NotContains(t, string(page), "Shrink this run", "a directory without config.json cannot be shrunk")
	safe := *r
	safe.Verdict = checker.Safe
	safeDir := t.TempDir()
	require.NoError(t, WriteRunDir(safeDir, h, &safe))
	page, err = os.ReadFile(filepath.Join(safeDir, "report.html"))
	require.NoError(t, err)
	require.NotContains(t, string(page), "Shrink this run", "a run that is not unsafe has nothing to shrink")

	// A read-write lock has no view: the page says so, a stale view goes.
	h.Info.ReadWrite = true
	r2 := checker.Check(h, checker.DefaultOptions())
	require.NoError(t, WriteRunDir(dir, h, &r2))
	_, err = os.Stat(filepath.Join(dir, LinearizationFile))
	require.True(t, os.IsNotExist(err), "stale linearization.html kept")
	page, err = os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	has(t, string(page), "No linearization view: read-write locks are not modelled yet.")
	require.False(t, strings.Contains(string(page), `href="linearization.html"`), "links a view that is not there")
}

func TestBuildSearch(t *testing.T) {
	require.Nil(t, buildSearch(nil))
	v := buildSearch(&checker.SearchStats{Ops: 900, Forced: 800, Searched: 100, Windows: 7, MaxFrontier: 4096,
		Explored: 123456, Bound: 4096, Exceeded: true, ExceededAt: 12_340_000_000, Indeterminate: 3})
	require.True(t, v.BoundHit)
	require.Equal(t, "88.9%", v.ForcedPct)
	facts := strings.Join(v.Facts, "\n")
	require.Contains(t, facts, "800 of 900 returns (88.9%)")
	require.Contains(t, facts, "searched among several configurations: 100")
	require.Contains(t, facts, "The search bound (4096 configurations) was hit at 12.34s")
	require.Contains(t, facts, "3 operations never answered")
	require.NotContains(t, facts, "was not hit")
}

// has is require.Contains without printing the whole page.
func has(t *testing.T, page, sub string) {
	t.Helper()
	require.True(t, strings.Contains(page, sub), "the page lacks %q", sub)
}

// TestLinearizationTooLarge: a page over MaxBytes is redrawn from a smaller
// window, and says so.
func TestLinearizationTooLarge(t *testing.T) {
	h := longHistory(t)
	r := checker.Check(h, checker.DefaultOptions())
	var big bytes.Buffer
	lv, err := WriteLinearization(&big, h, &r, LinearizationLimits{MaxOps: 400})
	require.NoError(t, err)
	require.Greater(t, lv.Ops, 200)

	var buf bytes.Buffer
	lv, err = WriteLinearization(&buf, h, &r, LinearizationLimits{MaxOps: 400, MaxBytes: big.Len() / 2})
	require.NoError(t, err)
	require.LessOrEqual(t, lv.Ops, 100)
	require.True(t, lv.Partial)
	require.Contains(t, strings.Join(lv.Notes, " "), "it was redrawn with fewer")
	require.Contains(t, buf.String(), `<p class="partial">The view of `)
	require.Equal(t, "not linearizable", lv.Result, "the smaller window still holds the failing part")
}

// TestLinearizationTimeout: a search that runs out of time draws what it
// found and says plainly that it is no verdict.
func TestLinearizationTimeout(t *testing.T) {
	orig := checkVerbose
	t.Cleanup(func() { checkVerbose = orig })
	checkVerbose = func(m porcupine.Model, ops []porcupine.Operation, d time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
		_, info := orig(m, ops, d)
		return porcupine.Unknown, info
	}
	h, r := loadChecked(t, storedRun)
	var buf bytes.Buffer
	lv, err := WriteLinearization(&buf, h, r, LinearizationLimits{Timeout: 2 * time.Second})
	require.NoError(t, err)
	require.Equal(t, "undecided: the search ran out of its 2s", lv.Result)
	require.Equal(t, "unknown", lv.ResultClass)
	require.True(t, lv.Partial)
	require.Contains(t, strings.Join(lv.Notes, " "), "not a verdict")
	has(t, buf.String(), `id="lin-result">undecided: the search ran out of its 2s</span>`)
	has(t, buf.String(), `<p class="partial" id="lin-scope">`)
}

// TestLinearizationOfUnsafeRunIsNotAGreenPass: on an unsafe run whose
// lock operations are linearizable (a lease lock: double holders after a
// lease ran out are correct answers), the view does not show a bare green
// "linearizable" but says against what, and why the run is still unsafe;
// it lists the anomalies above the drawing and opens on the first one. A
// safe run keeps the plain pass.
func TestLinearizationOfUnsafeRunIsNotAGreenPass(t *testing.T) {
	h, r := loadChecked(t, storedRun)
	require.Equal(t, checker.Unsafe, r.Verdict)
	var buf bytes.Buffer
	lv, err := WriteLinearization(&buf, h, r, LinearizationLimits{})
	require.NoError(t, err)
	require.Equal(t, "linearizable", lv.Result, "porcupine's own result is kept")
	require.Equal(t, "linearizable against a lease lock", lv.Shown)
	require.Equal(t, "consistent", lv.ShownClass)
	require.Contains(t, lv.Explain, "The lock answered consistently")
	require.Contains(t, lv.Explain, "the double holders on the run page come from leases that ran out")
	page := buf.String()
	require.Contains(t, page, `<span class="res" id="lin-result">linearizable against a lease lock</span>`)
	require.NotContains(t, page, "#locktest { border-left-color: #1a7f37; }", "not green")
	require.Contains(t, page, `<p>The run: <span class="run unsafe">UNSAFE</span>`)
	require.Contains(t, page, `<div id="lin-anomalies">`)
	require.Contains(t, page, `onclick="return ltShow( 1 )">#1 double-holder</a> (lease-expired)`)
	require.Len(t, lv.AnomalyList, len(r.Anomalies))
	require.Contains(t, page, jumpAnchor+showAnomalyJS+firstAnomalyOnLoad, "opens on the first anomaly")

	// The run page says the same.
	var rp bytes.Buffer
	require.NoError(t, writeRunPage(&rp, h, r, nil, &lv, ""))
	require.Contains(t, rp.String(), `<span class="badge consistent">linearizable against a lease lock</span>`)

	// A safe run: a plain pass.
	safe := *r
	safe.Verdict, safe.Anomalies = checker.Safe, nil
	buf.Reset()
	lv, err = WriteLinearization(&buf, h, &safe, LinearizationLimits{})
	require.NoError(t, err)
	require.Equal(t, "linearizable", lv.Shown)
	require.Equal(t, "pass", lv.ShownClass)
	require.Empty(t, lv.Explain)
	require.Contains(t, buf.String(), "#locktest { border-left-color: #1a7f37; }")
}

// On a long generated history whose linearizable property fails (double
// grants injected) and whose view is a window the failure is not in, the
// headline says the window is linearizable and the whole history is not:
// never a bare "linearizable" (nor "linearizable against a lease lock"
// with the lock said to have answered consistently), on the view or on
// the run page.
func TestLinearizationWindowHeadlineKeepsTheVerdict(t *testing.T) {
	cfg := lostgen.Config{Seed: 1, Ops: 20000, Clients: 50, Lost: 0.2, Double: 3, Mix: lostgen.MixCertain}
	h, tr, err := lostgen.GenerateHistory(cfg)
	require.NoError(t, err)
	require.NotEmpty(t, tr.Injections)
	r := checker.Check(h, checker.DefaultOptions())
	require.Equal(t, checker.Fail, linearizableProperty(&r).Status)
	var buf bytes.Buffer
	lim := DefaultLinearizationLimits
	lim.Timeout = time.Minute // (the search takes ~1 s, longer under -race on a loaded machine)
	lv, err := WriteLinearization(&buf, h, &r, lim)
	require.NoError(t, err)
	require.True(t, lv.Partial)
	require.Contains(t, lv.Scope, "is not in it", "the failure is outside the window (else this test shows nothing)")
	require.Equal(t, "linearizable", lv.Result, "porcupine's own result is kept")
	require.Equal(t, "this window is linearizable; the whole history is not", lv.Shown)
	require.Equal(t, "fail", lv.ShownClass)
	require.Contains(t, lv.Explain, "linearizable property FAILED on the whole history")
	require.NotContains(t, lv.Explain, "answered consistently")
	page := buf.String()
	require.Contains(t, page, `id="lin-result">this window is linearizable; the whole history is not</span>`)
	require.NotContains(t, page, "no order of these operations is consistent", "porcupine found an order for the window")

	var rp bytes.Buffer
	require.NoError(t, writeRunPage(&rp, h, &r, nil, &lv, ""))
	require.Contains(t, rp.String(), `<span class="badge fail">this window is linearizable; the whole history is not</span>`)
	require.NotContains(t, rp.String(), `<span class="badge consistent">`)
}
