package reports

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run whose faults were replayed (locktest run --schedule) says so, and
// from which file, on the terminal and on its page; a drawn run says
// nothing of the kind.
func TestReplayedRunSaysSo(t *testing.T) {
	for _, from := range []string{"", "/runs/a/schedule.json"} {
		h := sampleHistory(t)
		h.Info.ReplayedFrom = from
		r := sampleResult(t, h)
		var b strings.Builder
		WriteSummary(&b, h, r, false)
		page := render(t, h, r).text()
		if from == "" {
			require.NotContains(t, b.String(), "replayed")
			require.NotContains(t, page, "replayed")
			continue
		}
		require.Contains(t, b.String(), "faults replayed from /runs/a/schedule.json")
		require.Contains(t, page, "faults replayed from /runs/a/schedule.json")
	}
}
