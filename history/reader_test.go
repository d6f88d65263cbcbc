package history

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFromEventsRejects(t *testing.T) {
	header := Event{Type: Run, Info: &RunInfo{}}
	for name, c := range map[string]struct {
		events []Event
		err    string
	}{
		"no header":      {[]Event{{Type: Invoke, Client: 1, OpID: 1, Op: Acquire}}, "no run header"},
		"client 0":       {[]Event{header, {Seq: 2, Type: Invoke, Client: 0, OpID: 1, Op: Acquire}}, "event 2: operation 1 invoked by client 0 (clients are numbered from 1)"},
		"negative":       {[]Event{header, {Seq: 2, Type: Invoke, Client: -3, OpID: 7, Op: Release}}, "invoked by client -3"},
		"invoked twice":  {[]Event{header, {Seq: 2, Type: Invoke, Client: 1, OpID: 1, Op: Acquire}, {Seq: 3, Type: Invoke, Client: 1, OpID: 1, Op: Acquire}}, "operation 1 invoked twice"},
		"unknown return": {[]Event{header, {Seq: 2, Type: OK, Client: 1, OpID: 9}}, "completion of unknown operation 9"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := FromEvents(c.events)
			require.ErrorContains(t, err, c.err)
		})
	}
	h, err := FromEvents([]Event{header, {Seq: 2, Type: Invoke, Client: 1, OpID: 1, Op: Acquire}, {Seq: 3, Type: OK, Client: 1, OpID: 1, Time: 5}})
	require.NoError(t, err)
	require.Len(t, h.Ops, 1)
}
