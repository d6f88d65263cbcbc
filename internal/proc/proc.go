// Package proc freezes processes the harness started.
package proc

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Stop sends SIGSTOP to pid and returns once every thread of it has
// stopped. kill(2) returns before that: a thread running on another core
// can still run for a moment, and a fault that claims "frozen from now on"
// must not let it answer one more request.
func Stop(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	return WaitStopped(pid, time.Second)
}

// StopGroup stops the whole process group led by pid (a client program and
// anything it started) and returns once pid itself has stopped.
func StopGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		return err
	}
	return WaitStopped(pid, time.Second)
}

// Cont sends SIGCONT to pid.
func Cont(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }

// WaitStopped waits until every thread of pid is in the stopped state (a
// process that stops itself: the caller cannot know when it got there).
func WaitStopped(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if allStopped(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d not stopped after %s", pid, limit)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true // gone: nothing runs
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			return false
		}
	}
	return true
}
