package reports_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
)

// TestResultsDocCoversSchedule: every JSON field of schedule.json
// (nemesis.Schedule) and of every struct inside it has a row in its
// type's table in docs/results.md, and the doc documents no other.
func TestResultsDocCoversSchedule(t *testing.T) {
	fields := reports.DocCoversEveryField(t, nemesis.Schedule{})
	require.Contains(t, fields, "nemesis.Entry")
	require.Contains(t, fields, "nemesis.Trigger")
}
