package history

import (
	"math/rand/v2"
	"path/filepath"
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

// TestWindowWholeOperations: Window keeps whole operations inside its
// spans (and every event of no operation), the same from a lean history
// (events read back from the file) as from one read whole.
func TestWindowWholeOperations(t *testing.T) {
	files, err := filepath.Glob("../checker/testdata/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		lean, err := Load(f)
		if err != nil {
			continue // the testdata's malformed histories
		}
		whole, err := lean.Whole()
		require.NoError(t, err)
		mid := lean.End / 2
		spans := []Span{{From: 0, To: mid / 2}, {From: mid, To: Never}}
		a, err := lean.Window(spans)
		require.NoError(t, err, f)
		b, err := whole.Window(spans)
		require.NoError(t, err, f)
		require.Equal(t, b.Events, a.Events, f)
		require.Equal(t, lean.OpsWithin(spans), len(a.Ops), f)
		for _, o := range a.Ops {
			in := func(t int64) bool { return spans[0].contains(t) || spans[1].contains(t) }
			require.True(t, in(o.Call) && (o.Completed == Never || in(o.Completed)), "%s: op %d lies in a span", f, o.OpID)
		}
		require.Equal(t, len(lean.Faults), len(a.Faults), "%s: every fault kept", f)
	}
}

// TestOpsCounter: OpsCounter counts what OpsWithin counts, with one span or
// several overlapping ones, on histories in order of invocation (binary
// search) and on one that is not (the scan).
func TestOpsCounter(t *testing.T) {
	files, err := filepath.Glob("../checker/testdata/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range files {
		h, err := Load(f)
		if err != nil || len(h.Ops) < 2 {
			continue
		}
		count := h.OpsCounter()
		for range 50 {
			var spans []Span
			for range 1 + rng.IntN(3) {
				a, b := rng.Int64N(h.End+2)-1, rng.Int64N(h.End+2)-1
				s := Span{From: min(a, b), To: max(a, b)}
				if rng.IntN(4) == 0 {
					s.To = Never
				}
				spans = append(spans, s)
			}
			require.Equal(t, h.OpsWithin(spans), count(spans), "%s: %v", f, spans)
		}
	}
	h := &History{Ops: []Operation{{Call: 5, Completed: 6}, {Call: 1, Completed: 2}, {Call: 3, Completed: Never}}}
	for _, s := range []Span{{From: 0, To: 2}, {From: 2, To: 10}, {From: 0, To: Never}} {
		require.Equal(t, h.OpsWithin([]Span{s}), h.OpsCounter()([]Span{s}), "%v", s)
	}
}
