package harnesstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// setGate puts the gate in a known state: floor 2, ceiling 4, running
// runs under way, quiet of them quiet, the given waiters, and the last
// idleWindow of CPU time idle by the share idle.
func setGate(t *testing.T, running, quiet int, idle float64, waiting ...*waiter) {
	t.Helper()
	gate.Lock()
	defer gate.Unlock()
	gate.floor, gate.ceiling, gate.configured = 2, 4, true
	gate.running, gate.quiet = running, quiet
	gate.waiting = waiting
	gate.lastExtra = time.Time{}
	now := time.Now()
	gate.samples = []cpuSample{
		{at: now.Add(-idleWindow), idle: 0, total: 0},
		{at: now, idle: uint64(idle * 1000), total: 1000},
	}
}

func TestGateAdmits(t *testing.T) {
	long := &waiter{expected: 20 * time.Second, seq: 1}
	short := &waiter{expected: 8 * time.Second, seq: 2}
	quiet := &waiter{expected: 12 * time.Second, quiet: true, seq: 3}
	cases := []struct {
		name           string
		running, quiet int
		idle           float64
		waiting        []*waiter
		w              *waiter
		ok, extra      bool
	}{
		{"under the floor, whatever the machine", 1, 0, 0, []*waiter{short}, short, true, false},
		{"the longest waiter first", 0, 0, 0.9, []*waiter{long, short}, short, false, false},
		{"the longest waiter", 0, 0, 0.9, []*waiter{long, short}, long, true, false},
		{"at the floor on a busy machine", 2, 0, 0.1, []*waiter{short}, short, false, false},
		{"at the floor on an idle machine: an extra run", 2, 0, 0.6, []*waiter{short}, short, true, true},
		{"never above the ceiling", 4, 0, 1, []*waiter{short}, short, false, false},
		{"no extra run beside a quiet cell", 2, 1, 0.9, []*waiter{short}, short, false, false},
		{"no extra run while a quiet cell waits", 2, 0, 0.9, []*waiter{long, quiet}, long, false, false},
		{"a quiet cell never as an extra run", 2, 0, 0.9, []*waiter{quiet}, quiet, false, false},
		{"a quiet cell under the floor", 1, 0, 0, []*waiter{quiet, short}, quiet, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setGate(t, tc.running, tc.quiet, tc.idle, tc.waiting...)
			gate.Lock()
			ok, extra, _ := admit(tc.w)
			gate.Unlock()
			require.Equal(t, tc.ok, ok, "admitted")
			require.Equal(t, tc.extra, extra, "as an extra run")
		})
	}

	// Right after an extra run started, the next waits for it to show in
	// the idle figure.
	setGate(t, 3, 0, 0.9, short)
	gate.Lock()
	gate.lastExtra = time.Now()
	ok, _, _ := admit(short)
	gate.Unlock()
	require.False(t, ok)
}

// The idle share is read from the machine's /proc/stat.
func TestReadCPU(t *testing.T) {
	a, err := readCPU()
	require.NoError(t, err)
	require.Positive(t, a.total)
	require.LessOrEqual(t, a.idle, a.total)
	time.Sleep(50 * time.Millisecond)
	b, err := readCPU()
	require.NoError(t, err)
	require.GreaterOrEqual(t, b.total, a.total)
}
