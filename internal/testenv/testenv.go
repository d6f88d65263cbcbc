// Package testenv decides what a test does when something it needs from
// the machine is missing (a server binary, root for the network layer,
// libfaketime, a Docker image): outside CI it skips, saying what to
// install; under CI (the CI variable set, as .ci/run runs) a missing
// prerequisite is a broken install, and the test fails.
package testenv

import (
	"os"
	"testing"
)

// Require skips t (outside CI) or fails it (under CI) when err, why a
// prerequisite is missing, is not nil.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("under CI: %v", err)
	}
	t.Skip(err.Error())
}
