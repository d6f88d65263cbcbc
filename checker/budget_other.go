//go:build !linux

package checker

import "time"

// threadCPU: no thread CPU clock here; budgets count wall time.
func threadCPU() (time.Duration, bool) { return 0, false }
