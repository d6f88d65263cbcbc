package reports_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/shrink"
)

// TestResultsDocCoversShrinkReport: every JSON field of shrink.json
// (shrink.Report) and of every struct inside it has a row in its type's
// table in docs/results.md, and the doc documents no other.
func TestResultsDocCoversShrinkReport(t *testing.T) {
	fields := reports.DocCoversEveryField(t, shrink.Report{})
	require.Contains(t, fields, "shrink.Try")
	require.Contains(t, fields, "shrink.Config")
}

// TestResultsDocCoversSchedule: the same for a run's schedule.json
// (nemesis.Schedule), which `locktest run --schedule` reads back.
func TestResultsDocCoversSchedule(t *testing.T) {
	fields := reports.DocCoversEveryField(t, nemesis.Schedule{})
	require.Contains(t, fields, "nemesis.Entry")
	require.Contains(t, fields, "nemesis.Trigger")
}
