package shrink

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

func TestTryOf(t *testing.T) {
	s := func(x float64) int64 { return int64(x * float64(time.Second)) }
	p := Property{Kind: checker.KindDoubleHolder, Cause: checker.CauseLeaseExpired}
	anomaly := func(kind checker.Kind, cause checker.Cause, start, end float64) checker.Anomaly {
		return checker.Anomaly{Kind: kind, Cause: cause, Severity: checker.SeverityViolation, Start: s(start), End: s(end)}
	}
	cases := []struct {
		name       string
		anomalies  []checker.Anomaly
		faults     []history.Fault
		reproduced bool
		after      int64
		fault      string
	}{
		{"pause before the second grant", []checker.Anomaly{anomaly(p.Kind, p.Cause, 1.5, 1.6)},
			[]history.Fault{{Name: "kill", Start: s(0.2)}, {Name: "pause", Start: s(1.0)}, {Name: "partition", Start: s(2)}}, true, s(0.5), "pause"},
		{"fault inside the window counts at 0", []checker.Anomaly{anomaly(p.Kind, p.Cause, 3.3080, 3.95)},
			[]history.Fault{{Name: "kill", Start: s(3.3085)}}, true, 0, "kill"},
		{"a failed fault struck nothing", []checker.Anomaly{anomaly(p.Kind, p.Cause, 1.5, 1.6)},
			[]history.Fault{{Name: "pause", Start: s(1.0), Failed: true}}, true, -1, ""},
		{"the earliest of the property's violations", []checker.Anomaly{anomaly(p.Kind, p.Cause, 2.5, 2.6), anomaly(p.Kind, p.Cause, 1.5, 1.6)},
			[]history.Fault{{Name: "pause", Start: s(1.0)}}, true, s(0.5), "pause"},
		{"another cause is not the property", []checker.Anomaly{anomaly(p.Kind, checker.CauseLeaseBroken, 1.5, 1.6)}, nil, false, -1, ""},
		{"contained is not a violation", []checker.Anomaly{{Kind: p.Kind, Cause: p.Cause, Severity: checker.SeverityContained, Start: s(1)}}, nil, false, -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &checker.Result{Verdict: checker.Unsafe, Anomalies: tc.anomalies}
			got := TryOf(p, "d", r, tc.faults, time.Second)
			require.Equal(t, tc.reproduced, got.Reproduced)
			require.Equal(t, tc.after, got.AfterFaultNs)
			require.Equal(t, tc.fault, got.Fault)
		})
	}
}
