package checker

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// burn spins until stop says so, and returns how many times it asked.
func burn(stop func() bool) int {
	n, x := 0, uint64(1)
	for !stop() {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		n++
	}
	if x == 0 {
		n++ // (keeps the loop)
	}
	return n
}

// TestBudgetCPU: a goroutine that burns CPU trips its CPU budget, with the
// CPU spent by then at least the budget (and not much more); a sleeping
// one does not, and a CPU hog on another goroutine does not count, but the
// wall-time ceiling ends the budget.
func TestBudgetCPU(t *testing.T) {
	t.Run("burning trips the CPU budget", func(t *testing.T) {
		b := startBudgetWall(50*time.Millisecond, time.Hour)
		defer b.stop()
		if runtime.GOOS == "linux" {
			require.True(t, b.cpuClock, "the thread's CPU clock is readable on Linux")
		}
		burn(b.over)
		cpu, wall := b.spent()
		require.Equal(t, outOfCPU, b.out)
		require.GreaterOrEqual(t, cpu, 50*time.Millisecond)
		require.Less(t, cpu, 50*time.Millisecond+25*time.Millisecond, "overshoot (wall %v)", wall)
		require.Equal(t, "its budget (50ms of CPU)", b.ranOut("budget"))
		require.Equal(t, "cpu-budget", b.outName())
		require.True(t, b.over(), "stays over")
	})
	t.Run("sleeping trips only the wall ceiling", func(t *testing.T) {
		b := startBudgetWall(20*time.Millisecond, 400*time.Millisecond)
		defer b.stop()
		time.Sleep(100 * time.Millisecond) // 5 times the CPU budget
		require.False(t, b.over(), "a sleeping goroutine spent its CPU budget")
		require.Empty(t, b.ranOut("budget"))
		time.Sleep(time.Until(b.wall0.Add(410 * time.Millisecond)))
		require.True(t, b.over())
		require.Equal(t, outOfWall, b.out)
		cpu, _ := b.spent()
		require.Less(t, cpu, 20*time.Millisecond)
		require.True(t, strings.HasPrefix(b.ranOut("budget"), "its wall-time ceiling (400ms, 5 times its budget of 20ms of CPU, after "), b.ranOut("budget"))
		require.Equal(t, "wall-ceiling", b.outName())
	})
	t.Run("another goroutine's CPU does not count", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("no thread CPU clock here: budgets count wall time")
		}
		b := startBudgetWall(20*time.Millisecond, time.Hour)
		defer b.stop()
		var wg sync.WaitGroup
		end := time.Now().Add(200 * time.Millisecond)
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() { burn(func() bool { return time.Now().After(end) }) })
		}
		wg.Wait()
		require.False(t, b.over(), "the other goroutines' CPU counted")
		cpu, wall := b.spent()
		require.Less(t, cpu, 20*time.Millisecond, "wall %v", wall)
	})
}

// BenchmarkBudget: what a poll of a running budget costs (the monotonic
// clock, the CPU clock at most once a millisecond), against a reading of
// the thread's CPU clock (a system call) and the wall clock.
func BenchmarkBudget(b *testing.B) {
	b.Run("over", func(b *testing.B) {
		bu := startBudgetWall(time.Hour, time.Hour)
		defer bu.stop()
		for b.Loop() {
			if bu.over() {
				b.Fatal("over")
			}
		}
	})
	b.Run("threadCPU", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for b.Loop() {
			threadCPU()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			time.Now()
		}
	})
}
