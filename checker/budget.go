package checker

import (
	"fmt"
	"runtime"
	"time"
)

// A budget bounds a search by the CPU time it got, not by the wall time it
// took: on a loaded machine (CI on a busy box, CPU hogs, the check right
// after a run's workload) a wall-time budget makes the verdict depend on
// the load, and two checks of the same history disagree. A wall-time
// ceiling (wallCeiling times the CPU budget) still ends a search that is
// starved of CPU.
//
// The CPU counted is the calling thread's (CLOCK_THREAD_CPUTIME_ID, user
// and system), and startBudget locks the calling goroutine to its thread
// until stop, so it is the search's own: neither the other goroutines of
// the process (other checks, a run's leftovers) nor the garbage
// collector's background workers, which run on other threads, count. The
// collection work the search does itself (assists while it allocates) does.
// Background collection is left out because it is shared by everything
// that allocates in the process and depends on GOGC and on the heap the
// rest of the process keeps, not on the history; it is a fraction of the
// search's own CPU (see checker/README.md, "Time budget").
//
// Where the thread's CPU clock is not available (not Linux), the budget
// counts wall time, as before, and says so.
//
// A budget is used by one goroutine, the one that started it; stop it on
// that goroutine (defer b.stop()). Budgets nest (each locks the thread
// once more).
type budget struct {
	cpu, wall time.Duration // the CPU budget and the wall-time ceiling
	cpuClock  bool          // the thread's CPU clock is read; else wall time counts
	cpu0      time.Duration // the thread's CPU clock at the start
	wall0     time.Time
	// The last reading of the CPU clock: when, and the CPU spent by then.
	lastWall time.Time
	lastCPU  time.Duration
	out      budgetOut
	stopped  bool
}

// budgetOut says what ended a budget.
type budgetOut uint8

const (
	budgetLeft budgetOut = iota
	outOfCPU             // the CPU budget ran out
	outOfWall            // the wall-time ceiling passed first
)

// wallCeiling is the wall-time ceiling of a budget, in CPU budgets (a
// variable for tests).
var wallCeiling = 5

// cpuSampleEvery is the least wall time between two readings of the CPU
// clock (a system call): a search overshoots its CPU budget by at most
// that much.
const cpuSampleEvery = time.Millisecond

// startBudget starts a budget of cpu of CPU time with a wall-time ceiling
// of wallCeiling times that, and locks the calling goroutine to its
// thread until stop.
func startBudget(cpu time.Duration) *budget {
	return startBudgetWall(cpu, time.Duration(wallCeiling)*cpu)
}

// startBudgetWall is startBudget with the wall-time ceiling given.
func startBudgetWall(cpu, wall time.Duration) *budget {
	runtime.LockOSThread()
	b := &budget{cpu: cpu, wall: wall}
	b.cpu0, b.cpuClock = threadCPU()
	b.wall0 = time.Now()
	b.lastWall = b.wall0
	return b
}

// stop unlocks the goroutine from its thread (once). The budget's readings
// stay as they were at stop.
func (b *budget) stop() {
	if b.stopped {
		return
	}
	b.lastCPU, b.lastWall = b.cpuNow(), time.Now()
	b.stopped = true
	runtime.UnlockOSThread()
}

// over reports whether the budget ran out: the CPU budget, or the wall-time
// ceiling. Once true it stays true. It is cheap: it reads the monotonic
// clock, and the thread's CPU clock only when the CPU spent could have
// reached the budget (a thread gets at most the wall time that passes) and
// at most once every cpuSampleEvery.
func (b *budget) over() bool {
	if b.out != budgetLeft {
		return true
	}
	if b.stopped {
		return false
	}
	now := time.Now()
	if now.Sub(b.wall0) >= b.wall {
		b.out = outOfWall
		return true
	}
	since := now.Sub(b.lastWall)
	if b.lastCPU+since < b.cpu || since < cpuSampleEvery {
		return false
	}
	b.lastWall, b.lastCPU = now, b.cpuNow()
	if b.lastCPU >= b.cpu {
		b.out = outOfCPU
		return true
	}
	return false
}

// cpuNow is the CPU time the thread got since the start (wall time without
// the CPU clock).
func (b *budget) cpuNow() time.Duration {
	if !b.cpuClock {
		return time.Since(b.wall0)
	}
	c, _ := threadCPU()
	return c - b.cpu0
}

// spent returns the CPU time the search got (at its last reading, or now if
// the budget is running) and the wall time it took.
func (b *budget) spent() (cpu, wall time.Duration) {
	if b.stopped {
		return b.lastCPU, b.lastWall.Sub(b.wall0)
	}
	return b.cpuNow(), time.Since(b.wall0)
}

// String states the budget: "1m0s of CPU" ("of wall time" without a CPU
// clock).
func (b *budget) String() string {
	if !b.cpuClock {
		return fmt.Sprintf("%s of wall time", b.cpu)
	}
	return fmt.Sprintf("%s of CPU", b.cpu)
}

// ranOut says what ran out, for a detail: "its budget (1m0s of CPU)", or,
// where the ceiling stopped it, "its wall-time ceiling (5m0s, 5 times its
// budget of 1m0s of CPU, after 40s of CPU)"; name names the budget (e.g.
// "budget"). Empty while it has not.
func (b *budget) ranOut(name string) string {
	switch b.out {
	case outOfCPU:
		return fmt.Sprintf("its %s (%s)", name, b)
	case outOfWall:
		cpu, _ := b.spent()
		return fmt.Sprintf("its wall-time ceiling (%s, %d times its %s of %s, after %s of CPU)",
			b.wall, wallCeiling, name, b, cpu.Round(time.Millisecond))
	}
	return ""
}

// outName is what ended the budget, for results.json: "cpu-budget",
// "wall-ceiling" ("wall-budget" without a CPU clock), or "".
func (b *budget) outName() string {
	switch {
	case b.out == outOfCPU && b.cpuClock:
		return "cpu-budget"
	case b.out == outOfCPU:
		return "wall-budget"
	case b.out == outOfWall:
		return "wall-ceiling"
	}
	return ""
}
