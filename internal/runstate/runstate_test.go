package runstate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run is live while the very process that started it runs, whatever its
// name: this test binary is not called locktest, and cleanup once killed
// the servers of tests that were still running.
func TestStaleKnowsLiveHarnessByPidAndStartTime(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LOCKTEST_STATE_DIR", dir)

	live, err := Open("live", "/nowhere")
	require.NoError(t, err)
	defer live.Close()

	self, err := StartTime(os.Getpid())
	require.NoError(t, err)
	write := func(st State) {
		b, err := json.Marshal(st)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, st.RunID+".json"), b, 0o600))
	}
	// Our pid, another start time: a pid reused after the harness died.
	write(State{RunID: "reused-pid", HostPID: os.Getpid(), HostStart: self + 1})
	// A pid that no process has.
	write(State{RunID: "gone", HostPID: 1 << 30, HostStart: 5})
	// An old state file without a start time, of a live process that is
	// not named locktest.
	write(State{RunID: "old-format", HostPID: os.Getpid()})

	stale, err := Stale()
	require.NoError(t, err)
	var ids []string
	for _, st := range stale {
		ids = append(ids, st.RunID)
	}
	require.ElementsMatch(t, []string{"reused-pid", "gone", "old-format"}, ids)
}
