package harnesstest

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real-server tests of a package start their runs through a gate: go
// test's -parallel alone would run a fixed number of them at once, too few
// on an idle machine (they mostly wait: on servers starting, on runs of
// fixed length, on faults and their healing) and too many beside other
// busy processes, where the timing-sensitive cells (Sentinel failover,
// ZooKeeper sessions, MariaDB replication) starve.
//
// The gate lets a test start at once while fewer than floor runs are under
// way (GOMAXPROCS, go test's default -parallel: what the suite always ran),
// and up to ceiling (twice that) only while the machine has CPU to spare:
// at least minIdle of it idle over the last idleWindow (on 2 cores, the
// four runs of harness and harness/integration at their floor leave 25-55%
// idle; beside one CPU hog or the checker's CPU-bound tests, nearly none),
// no extra run admitted in the last rampGap (a run's start-up has not
// shown in the figure yet), and no quiet cell under way or waiting. Beside
// two CPU hogs the machine is never idle and the gate runs floor at a
// time, as before. A quiet cell starts only under the floor and, while it
// runs, no extra run starts. The waiting test expected to take longest
// starts first, so that no long test is left to run alone at the end.
// Every parallel test reaches the gate (-parallel 64).
//
// go test -parallel N sets floor and ceiling to N (-parallel 1 runs the
// tests one by one).
const (
	minIdle    = 0.35
	idleWindow = 2 * time.Second
	rampGap    = 2 * time.Second
)

var gate = struct {
	sync.Mutex
	floor, ceiling   int
	configured       bool
	running, quiet   int
	waiting          []*waiter
	seq              int
	lastExtra        time.Time
	sampling         sync.Once
	samples          []cpuSample // the last idleWindow of /proc/stat, oldest first
	admitted, extras int
}{}

// waiter is a test waiting at the gate.
type waiter struct {
	expected time.Duration
	quiet    bool
	seq      int
}

// before orders the waiters: the longest expected first (a long test
// started last is the package's tail), then in order of arrival.
func (w *waiter) before(v *waiter) bool {
	if w.expected != v.expected {
		return w.expected > v.expected
	}
	return w.seq < v.seq
}

type cpuSample struct {
	at          time.Time
	idle, total uint64
}

// setParallel sets the gate's bounds and lets every parallel test reach
// the gate (-parallel 64: the gate, not go test, bounds the runs and
// orders them), unless -parallel was given: then that many run at once,
// whatever the machine does. Call it before m.Run.
func setParallel() {
	flag.Parse()
	given := 0
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			given, _ = strconv.Atoi(f.Value.String())
		}
	})
	gate.Lock()
	defer gate.Unlock()
	gate.configured = true
	if given > 0 {
		gate.floor, gate.ceiling = given, given
		return
	}
	gate.floor = runtime.GOMAXPROCS(0)
	gate.ceiling = 2 * gate.floor
	if err := flag.Set("test.parallel", "64"); err != nil {
		panic(err)
	}
}

// Slot waits until the test may start its runs (see the gate above) and
// gives the slot back when the test ends. expected is about how long its
// runs take (their time limits): the longest waiting test starts first.
// Call it after t.Parallel, before anything starts a server.
func Slot(t *testing.T, expected time.Duration) { slot(t, expected, false) }

// QuietSlot is Slot for a timing-sensitive cell (a failover): it starts
// only while fewer than the floor of runs are under way, and while it runs
// (or waits) no extra run starts.
func QuietSlot(t *testing.T, expected time.Duration) { slot(t, expected, true) }

func slot(t *testing.T, expected time.Duration, quiet bool) {
	t.Helper()
	gate.Lock()
	if !gate.configured {
		gate.floor, gate.ceiling, gate.configured = runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0), true
	}
	gate.sampling.Do(func() { go sampleCPU() })
	gate.seq++
	w := &waiter{expected: expected, quiet: quiet, seq: gate.seq}
	gate.waiting = append(gate.waiting, w)
	gate.Unlock()
	t0 := time.Now()
	for {
		gate.Lock()
		ok, extra, idle := admit(w)
		if ok {
			gate.waiting = slices.DeleteFunc(gate.waiting, func(v *waiter) bool { return v == w })
			gate.running++
			gate.admitted++
			if quiet {
				gate.quiet++
			}
			if extra {
				gate.extras++
				gate.lastExtra = time.Now()
			}
			running := gate.running
			gate.Unlock()
			how := "within the floor"
			if extra {
				how = fmt.Sprintf("as an extra run (%.0f%% of the CPU idle)", 100*idle)
			}
			t.Logf("run slot after %s: %d runs under way, %s", time.Since(t0).Round(time.Millisecond), running, how)
			break
		}
		gate.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		gate.Lock()
		defer gate.Unlock()
		gate.running--
		if quiet {
			gate.quiet--
		}
	})
}

// admit says whether w may start now (it is the first waiter and a run
// may start), whether as an extra run (above the floor), and the idle
// share that was judged on. gate is locked.
func admit(w *waiter) (ok, extra bool, idle float64) {
	for _, v := range gate.waiting {
		if v.before(w) {
			return false, false, 0
		}
	}
	quietWaiting := slices.ContainsFunc(gate.waiting, func(v *waiter) bool { return v.quiet })
	switch {
	case gate.running >= gate.ceiling:
		return false, false, 0
	case gate.running < gate.floor:
		return true, false, 0
	case w.quiet, gate.quiet > 0, quietWaiting, time.Since(gate.lastExtra) < rampGap:
		return false, false, 0
	}
	idle, ok = idleShare()
	if !ok || idle < minIdle {
		return false, false, idle
	}
	return true, true, idle
}

// idleShare is the share of the machine's CPU time that was idle over the
// last idleWindow; false until the window is covered.
func idleShare() (float64, bool) {
	s := gate.samples
	if len(s) < 2 || s[len(s)-1].at.Sub(s[0].at) < idleWindow*3/4 {
		return 0, false
	}
	first, last := s[0], s[len(s)-1]
	if last.total <= first.total {
		return 0, false
	}
	return float64(last.idle-first.idle) / float64(last.total-first.total), true
}

// sampleCPU reads /proc/stat every quarter of a second for the life of the
// test binary, keeping the last idleWindow of samples.
func sampleCPU() {
	for {
		if s, err := readCPU(); err == nil {
			gate.Lock()
			gate.samples = append(gate.samples, s)
			for len(gate.samples) > 2 && s.at.Sub(gate.samples[1].at) >= idleWindow {
				gate.samples = gate.samples[1:]
			}
			gate.Unlock()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readCPU reads the machine's idle and total CPU time from /proc/stat's
// first line (idle and iowait count as idle).
func readCPU() (cpuSample, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuSample{}, fmt.Errorf("/proc/stat: empty")
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return cpuSample{}, fmt.Errorf("/proc/stat: unexpected first line %q", sc.Text())
	}
	s := cpuSample{at: time.Now()}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuSample{}, fmt.Errorf("/proc/stat: %w", err)
		}
		// user nice system idle iowait irq softirq steal (guest time is
		// counted in user already).
		if i >= 8 {
			break
		}
		s.total += v
		if i == 3 || i == 4 {
			s.idle += v
		}
	}
	return s, nil
}

// SlotStats is how many runs the gate admitted and how many of them as
// extra runs, for a package's closing log line.
func SlotStats() (admitted, extras int) {
	gate.Lock()
	defer gate.Unlock()
	return gate.admitted, gate.extras
}
