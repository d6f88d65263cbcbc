package history

import "golang.org/x/sys/unix"

// Monotonic returns the raw CLOCK_MONOTONIC reading in nanoseconds. It is the
// same clock in every process on the machine and never jumps with the wall
// clock, so readings from different processes compare directly.
func Monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC cannot fail on Linux; a zero here would be noticed.
		return 0
	}
	return ts.Nano()
}
