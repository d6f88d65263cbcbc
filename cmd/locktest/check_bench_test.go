package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/internal/lostgen"
)

// wholeCheckShape is a history `locktest check` is measured on, end to end
// (load, every property, results.json, both pages), and the exit code it
// must give.
type wholeCheckShape struct {
	name string
	cfg  lostgen.Config
	code int
}

// wholeCheckShapes are issue 17's shape (internal/lostgen: one 50 ms lease
// lock, lost answers open for the 1 s op timeout, half of them applied),
// the first its "done when" case: 1M operations, 50 clients, 1% lost, no
// violation.
var wholeCheckShapes = []wholeCheckShape{
	{"1M ops, 50 clients, 1% lost, valid", lostgen.Config{Seed: 1, Ops: 1_000_000, Clients: 50, Lost: 0.01, Mix: lostgen.MixMixed}, exitSafe},
	{"1M ops, 50 clients, 1% lost, 20 double grants", lostgen.Config{Seed: 1, Ops: 1_000_000, Clients: 50, Lost: 0.01, Double: 20, Mix: lostgen.MixMixed}, exitUnsafe},
	{"1M ops, 50 clients, 1% lost, no expiry: a lost grant holds the lock, a deadlock of 412 s", lostgen.Config{Seed: 1, Ops: 1_000_000, Clients: 50, Lost: 0.01, NoExpiry: true, Mix: lostgen.MixMixed}, exitUnsafe},
	{"100k ops, 50 clients, 5% lost, valid", lostgen.Config{Seed: 1, Ops: 100_000, Clients: 50, Lost: 0.05, Mix: lostgen.MixMixed}, exitSafe},
	{"100k ops, 50 clients, 5% lost, 5 double grants", lostgen.Config{Seed: 1, Ops: 100_000, Clients: 50, Lost: 0.05, Double: 5, Mix: lostgen.MixCertain}, exitUnsafe},
	{"10k ops, 50 clients, 5% lost, 3 double grants", lostgen.Config{Seed: 1, Ops: 10_000, Clients: 50, Lost: 0.05, Double: 3, Mix: lostgen.MixMixed}, exitUnsafe},
	{"1M ops, 50 clients, 5% lost, 20 double grants", lostgen.Config{Seed: 1, Ops: 1_000_000, Clients: 50, Lost: 0.05, Double: 20, Mix: lostgen.MixMixed}, exitUnsafe},
}

// wholeCheck is one `locktest check DIR` as a user runs it: its wall time,
// CPU time (user and system) and peak resident memory.
type wholeCheck struct {
	wall, cpu time.Duration
	rssMB     float64
	code      int // exit code
}

// anyCode: checkWith takes whatever exit code the check gives.
const anyCode = -1

// checkWith runs binary's check on dir and fails unless it exits with code
// (or any, anyCode) and writes results.json with a decided linearizable
// property (when code is not anyCode).
func checkWith(tb testing.TB, binary, dir string, code int) wholeCheck {
	tb.Helper()
	cmd := exec.Command(binary, "check", "--quiet", dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	var ee *exec.ExitError
	got := 0
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		tb.Fatal(err)
	}
	ps := cmd.ProcessState
	ru, _ := ps.SysUsage().(*syscall.Rusage)
	rss := 0.0
	if ru != nil {
		rss = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	c := wholeCheck{wall: wall, cpu: ps.UserTime() + ps.SystemTime(), rssMB: rss, code: got}
	if code == anyCode {
		return c
	}
	require.Equal(tb, code, got, "exit code of locktest check %s:\n%s", dir, out.String())
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(tb, err)
	var res struct {
		Properties []struct{ Name, Status string } `json:"properties"`
	}
	require.NoError(tb, json.Unmarshal(b, &res))
	for _, p := range res.Properties {
		if p.Name == "linearizable" {
			require.Contains(tb, []string{"pass", "fail"}, p.Status, "linearizable decided")
		}
	}
	return c
}

// writeShape writes the history of s in a new run directory under parent,
// with internal/lostgen's command in a process of its own: the peak RSS
// the kernel reports for a child counts its parent's at the fork (Go
// starts children with vfork, on the parent's memory), so the measuring
// process must never hold a large history.
func writeShape(tb testing.TB, parent string, s wholeCheckShape) string {
	tb.Helper()
	lostgenBin, err := buildLostgen()
	require.NoError(tb, err)
	dir := filepath.Join(parent, "run")
	c := s.cfg
	out, err := exec.Command(lostgenBin, "-out", dir, "-seed", fmt.Sprint(c.Seed), "-ops", fmt.Sprint(c.Ops), "-clients", fmt.Sprint(c.Clients),
		"-lost", fmt.Sprint(c.Lost), "-double", fmt.Sprint(c.Double), "-mix", string(c.Mix), "-no-expiry="+fmt.Sprint(c.NoExpiry)).CombinedOutput()
	require.NoError(tb, err, "%s", out)
	return dir
}

// buildLostgen builds internal/lostgen's command once, next to the binary,
// and returns its path.
var buildLostgen = sync.OnceValues(func() (string, error) {
	path := filepath.Join(filepath.Dir(bin), "lostgen")
	if out, err := exec.Command("go", "build", "-o", path, "../../internal/lostgen/cmd/lostgen").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build lostgen: %w: %s", err, out)
	}
	return path, nil
})

// BenchmarkCheckWhole runs `locktest check DIR` (the built binary) on
// each shape; besides the time per check it reports the check's CPU time
// and peak resident memory (the largest over the iterations).
//
//	go test ./cmd/locktest/ -run XXX -bench CheckWhole -benchtime 3x -timeout 30m
func BenchmarkCheckWhole(b *testing.B) {
	if testing.Short() {
		b.Skip("histories of up to 1M operations: not with -short")
	}
	for _, s := range wholeCheckShapes {
		b.Run(strings.ReplaceAll(s.name, " ", ""), func(b *testing.B) {
			dir := writeShape(b, b.TempDir(), s)
			var cpu time.Duration
			rss := 0.0
			b.ResetTimer()
			for range b.N {
				c := checkWith(b, bin, dir, s.code)
				cpu += c.cpu
				rss = max(rss, c.rssMB)
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(rss, "peak-MB")
		})
	}
}

// TestWholeCheckTable prints checker/README.md's "Whole check" table: each
// shape checked 5 times by the binary, the median wall and CPU time, the
// largest peak RSS, and the load average of the machine (1 minute) before
// and after. With LOCKTEST_BASE_BIN set to another build of locktest
// (main's, say), each check of this one is followed by one of that one,
// on the same history, and the table gets its verdict, median CPU time and
// peak RSS. A measurement, run only with LOCKTEST_PROBE=1:
//
//	LOCKTEST_PROBE=1 go test ./cmd/locktest/ -run TestWholeCheckTable -v -timeout 30m
func TestWholeCheckTable(t *testing.T) {
	if os.Getenv("LOCKTEST_PROBE") == "" {
		t.Skip("a measurement: set LOCKTEST_PROBE=1")
	}
	base := os.Getenv("LOCKTEST_BASE_BIN")
	head, rule := "| history (issue 17's shape) | verdict | median wall s | median CPU s | peak RSS MB |", "|---|---|---:|---:|---:|"
	if base != "" {
		head, rule = head+" base: verdict | base: median CPU s | base: peak RSS MB |", rule+"---|---:|---:|"
	}
	fmt.Println(head + " load average (1 min) before, after |")
	fmt.Println(rule + "---|")
	for _, s := range wholeCheckShapes {
		dir := writeShape(t, t.TempDir(), s)
		before := loadAverage(t)
		var this, that wholeChecks
		for range 5 {
			this.add(checkWith(t, bin, dir, s.code))
			if base != "" {
				that.add(checkWith(t, base, dir, anyCode))
			}
		}
		row := fmt.Sprintf("| %s | %s | %.2f | %.2f | %.0f |", s.name, verdictOf(s.code), median(this.walls), median(this.cpus), this.rss)
		if base != "" {
			row += fmt.Sprintf(" %s | %.2f | %.0f |", verdictOf(that.code), median(that.cpus), that.rss)
		}
		fmt.Printf("%s %s, %s |\n", row, before, loadAverage(t))
	}
}

// wholeChecks gathers the checks of one binary on one history.
type wholeChecks struct {
	walls, cpus []float64
	rss         float64
	code        int // the last exit code
}

func (w *wholeChecks) add(c wholeCheck) {
	w.walls, w.cpus = append(w.walls, c.wall.Seconds()), append(w.cpus, c.cpu.Seconds())
	w.rss, w.code = max(w.rss, c.rssMB), c.code
}

func verdictOf(code int) string {
	switch code {
	case exitSafe:
		return "safe"
	case exitUnsafe:
		return "unsafe"
	case exitInconclusive:
		return "inconclusive"
	}
	return fmt.Sprint("exit ", code)
}

// loadAverage is the machine's 1-minute load average.
func loadAverage(t *testing.T) string {
	b, err := os.ReadFile("/proc/loadavg")
	require.NoError(t, err)
	return strings.Fields(string(b))[0]
}
