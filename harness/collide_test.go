package harness_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// On a single server, pause-server and kill draw the same server: they
// take turns on it (kill skips a frozen server, pause-server waits until a
// killed one is back, each with a note) instead of killing a frozen server
// or freezing one that is being restarted, which used to abort the run.
func TestServerFaultsTakeTurns(t *testing.T) {
	t.Parallel()
	needServer(t)
	for _, cluster := range []string{"local", "docker"} {
		t.Run(cluster, func(t *testing.T) {
			if cluster == "docker" {
				needDocker(t)
			}
			t.Parallel()
			o := baseOptions(t, "redis-lua", "pause-server,kill", 31)
			o.Cluster, o.Images = cluster, dockerImages(cluster)
			o.TimeLimit = 10 * time.Second
			slot(t, 3*o.TimeLimit)
			// Both kinds must strike, or one find the server taken by the
			// other, for the turns to be tested. A fault waits for a
			// grant and for the other's turn: on a busy machine 10 s may
			// see one kind only (beside two CPU hogs: 1 kill, no pause),
			// so such a run is followed by one twice as long, which must
			// test them.
			for attempt := 1; ; attempt++ {
				out, err := Run(context.Background(), o)
				require.NoError(t, err)
				h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
				require.NoError(t, err)
				if assertTurns(t, h, attempt == 2) {
					break
				}
				t.Logf("run %d of %s saw only one kind of server fault: again for %s", attempt, o.TimeLimit, 2*o.TimeLimit)
				o.TimeLimit *= 2
			}
		})
	}
}

// assertTurns checks that no two server faults overlap on one server, and
// counts the turns skipped. It reports whether both kinds struck; when
// last, it fails unless they did.
func assertTurns(t *testing.T, h *history.History, last bool) bool {
	t.Helper()
	byTarget := map[string][]history.Fault{}
	for _, f := range h.Faults {
		if f.Client == 0 && (f.Name == "pause-server" || f.Name == "kill") {
			for _, target := range strings.Split(f.Target, ",") { // a kill of several servers
				byTarget[target] = append(byTarget[target], f)
			}
		}
	}
	names := map[string]int{}
	for _, fs := range byTarget {
		for i, a := range fs {
			names[a.Name]++
			require.NotEqual(t, history.Never, a.End, "%s on %s never ended", a.Name, a.Target)
			for _, b := range fs[i+1:] {
				require.False(t, b.Start < a.End && a.Start < b.End, "%s and %s overlap on %s", a.Name, b.Name, a.Target)
			}
		}
	}
	skips, waits := 0, 0
	for _, e := range h.Events {
		if e.Type == history.Note && strings.Contains(e.Detail, " skipped ") {
			skips++
		}
		if e.Type == history.Note && strings.Contains(e.Detail, " waited ") {
			waits++
		}
	}
	t.Logf("faults %v, %d turns skipped, %d waited for", names, skips, waits)
	// The turns were tested when both kinds struck (and never overlapped),
	// or when one kind found the server taken by the other and said so (a
	// skip or a wait: beside two CPU hogs a docker run of 20 s saw 1 kill
	// and the pause-server turn it skipped).
	if both := names["pause-server"] > 0 && names["kill"] > 0; both || skips+waits > 0 {
		return true
	}
	require.False(t, last, "neither both kinds of server fault (%v) nor a turn skipped or waited for", names)
	return false
}
