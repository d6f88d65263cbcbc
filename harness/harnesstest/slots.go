package harnesstest

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
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
// at least minIdle of it idle over the last idleWindow, no extra run
// admitted in the last rampGap (a run's start-up has not shown in the
// figure yet), and no quiet cell under way or waiting. Beside two CPU hogs
// the machine is never idle and the gate runs floor at a time, as before.
// A quiet cell starts only under the floor and, while it runs, no extra
// run starts.
//
// go test -parallel N sets floor and ceiling to N (-parallel 1 runs the
// tests one by one).
const (
	minIdle    = 0.5
	idleWindow = 2 * time.Second
	rampGap    = 2 * time.Second
)

var gate = struct {
	sync.Mutex
	floor, ceiling    int
	running, quiet    int
	quietWaiting      int
	lastExtra         time.Time
	sampling          sync.Once
	samples           []cpuSample // the last idleWindow of /proc/stat, oldest first
	admitted, extras  int
	configuredByFlags bool
}{}

type cpuSample struct {
	at          time.Time
	idle, total uint64
}

// setParallel makes -parallel default to the gate's ceiling (the gate, not
// go test, bounds the runs) unless it was given, and sets the gate's
// bounds; call it before m.Run.
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
	gate.configuredByFlags = true
	if given > 0 {
		gate.floor, gate.ceiling = given, given
		return
	}
	gate.floor = runtime.GOMAXPROCS(0)
	gate.ceiling = 2 * gate.floor
	if err := flag.Set("test.parallel", strconv.Itoa(gate.ceiling)); err != nil {
		panic(err)
	}
}

// Slot waits until the test may start its run (see the gate above) and
// gives the slot back when the test ends. Call it after t.Parallel, before
// anything starts a server.
func Slot(t *testing.T) { slot(t, false) }

// QuietSlot is Slot for a timing-sensitive cell (a failover, a session
// timeout): it starts only while fewer than the floor of runs are under
// way, and while it runs no extra run starts beside it.
func QuietSlot(t *testing.T) { slot(t, true) }

func slot(t *testing.T, quiet bool) {
	t.Helper()
	gate.Lock()
	if !gate.configuredByFlags {
		gate.floor, gate.ceiling, gate.configuredByFlags = runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0), true
	}
	gate.sampling.Do(func() { go sampleCPU() })
	if quiet {
		gate.quietWaiting++
	}
	gate.Unlock()
	t0 := time.Now()
	for {
		gate.Lock()
		ok, extra, idle := admit(quiet)
		if ok {
			gate.running++
			gate.admitted++
			if quiet {
				gate.quietWaiting--
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

// admit says whether a run may start now, whether it is an extra one
// (above the floor), and the idle share it was judged on. gate is locked.
func admit(quiet bool) (ok, extra bool, idle float64) {
	switch {
	case gate.running >= gate.ceiling:
		return false, false, 0
	case gate.running < gate.floor:
		return true, false, 0
	case quiet, gate.quiet > 0, gate.quietWaiting > 0, time.Since(gate.lastExtra) < rampGap:
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
