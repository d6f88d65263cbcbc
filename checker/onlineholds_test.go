package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// TestOnlineHolds: the online double-holder check follows the holds as
// Holds defines them.
func TestOnlineHolds(t *testing.T) {
	acq := func(c int, at int64, mode string) history.Event {
		return history.Event{Type: history.OK, Op: history.Acquire, Client: c, Time: at, Mode: mode}
	}
	rel := func(c int, at int64) history.Event {
		return history.Event{Type: history.Invoke, Op: history.Release, Client: c, Time: at}
	}
	exit := func(c int, at int64) history.Event {
		return history.Event{Type: history.ClientExit, Client: c, Time: at}
	}
	crash := func(c int, at int64) history.Event {
		return history.Event{Type: history.FaultStart, Fault: "crash-client", Client: c, Time: at}
	}
	cases := []struct {
		name    string
		info    history.RunInfo
		events  []history.Event
		clients []int // the double holder, nil for none
		at      int64
	}{
		{"granted while held", history.RunInfo{}, []history.Event{acq(2, 1, ""), acq(3, 2, ""), acq(1, 3, "")}, []int{2, 3}, 2},
		{"released first", history.RunInfo{}, []history.Event{acq(1, 1, ""), rel(1, 2), acq(2, 3, "")}, nil, 0},
		{"holder exited", history.RunInfo{}, []history.Event{acq(1, 1, ""), exit(1, 2), acq(2, 3, "")}, nil, 0},
		{"holder crashed", history.RunInfo{}, []history.Event{acq(1, 1, ""), crash(1, 2), acq(2, 3, "")}, nil, 0},
		{"reentrant: one release of two", history.RunInfo{Traits: history.Traits{Reentrant: true}},
			[]history.Event{acq(1, 1, ""), acq(1, 2, ""), rel(1, 3), acq(2, 4, "")}, []int{1, 2}, 4},
		{"not reentrant: the first release ends it", history.RunInfo{},
			[]history.Event{acq(1, 1, ""), acq(1, 2, ""), rel(1, 3), acq(2, 4, "")}, nil, 0},
		{"two readers", history.RunInfo{ReadWrite: true},
			[]history.Event{acq(1, 1, history.ModeRead), acq(2, 2, history.ModeRead)}, nil, 0},
		{"a writer among readers", history.RunInfo{ReadWrite: true},
			[]history.Event{acq(1, 1, history.ModeRead), acq(2, 2, history.ModeWrite)}, []int{1, 2}, 2},
		{"clients check validity: left to Check", history.RunInfo{Traits: history.Traits{ChecksValidity: true}},
			[]history.Event{acq(1, 1, ""), acq(2, 2, "")}, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOnlineHolds(tc.info)
			var found *Anomaly
			for _, e := range tc.events {
				if a := o.Add(e); a != nil && found == nil {
					found = a
				}
			}
			if tc.clients == nil {
				require.Nil(t, found)
				return
			}
			require.NotNil(t, found)
			require.Equal(t, KindDoubleHolder, found.Kind)
			require.Equal(t, SeverityViolation, found.Severity)
			require.Equal(t, tc.clients, found.Clients)
			require.Equal(t, tc.at, found.Start)
		})
	}
}
