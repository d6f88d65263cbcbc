package checker

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

func TestHolds(t *testing.T) {
	type span struct {
		client     int
		start, end float64
		reason     string
	}
	tests := []struct {
		name      string
		reentrant bool
		validity  bool // the clients check their validity
		build     func(b *hb)
		want      []span
	}{
		{"validity: a careful client frozen past it holds until it ends", false, true, func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100) // valid until 101
			b.use(1, false, 2, 500, history.Fail)
			b.rel(1, 501, 502, "a", history.Fail, "-")
		}, []span{{1, 1, 101, "validity"}}},
		{"validity: a use after it extends the hold to the use", false, true, func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, false, 2, 3, history.OK)
			b.use(1, true, 4, 300, history.OK)
			b.rel(1, 501, 502, "a", history.OK, "a")
		}, []span{{1, 1, 300, "validity"}}},
		{"validity: released in time, the release ends it", false, true, func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, true, 2, 3, history.OK)
			b.rel(1, 50, 51, "a", history.OK, "a")
		}, []span{{1, 1, 50, "release"}}},
		{"validity: uses outside the hold do not count", false, true, func(b *hb) {
			b.acqValid(1, 10, 11, "a", 100)
			b.use(1, true, 2, 400, history.OK) // before the acquire returned
			b.rel(1, 501, 502, "a", history.OK, "a")
		}, []span{{1, 11, 111, "validity"}}},
		{"no validity: a client that declines the resource held the lock until its last use", false, true, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.use(1, false, 2, 3, history.OK)
			b.use(1, true, 4, 40, history.OK) // frozen in the middle: it still used it
			b.use(1, false, 300, 301, history.Fail)
			b.rel(1, 302, 303, "a", history.OK, "a")
		}, []span{{1, 1, 40, "declined"}}},
		{"no validity: no decline, the release ends it", false, true, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.use(1, true, 4, 40, history.OK)
			b.rel(1, 302, 303, "a", history.OK, "a")
		}, []span{{1, 1, 302, "release"}}},
		{"no validity: declined before any use, the hold is its acquire's return", false, true, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.use(1, false, 200, 201, history.Fail)
			b.rel(1, 202, 203, "a", history.OK, "a")
		}, []span{{1, 1, 1, "declined"}}},
		{"validity ignored when the run does not say the clients check it", false, false, func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.rel(1, 501, 502, "a", history.OK, "a")
		}, []span{{1, 1, 501, "release"}}},
		{"acquire and release", false, false, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 5, 6, "a", history.OK, "a")
		}, []span{{1, 1, 5, "release"}}},
		{"failed and indeterminate acquires hold nothing", false, false, func(b *hb) {
			b.acqFail(1, 0, 1, history.ReasonHeld)
			b.acqInfo(2, 0, 9)
		}, nil},
		{"a failed release still ends the hold", false, false, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 5, 6, "a", history.Fail, "-")
		}, []span{{1, 1, 5, "release"}}},
		{"never released: end of history", false, false, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acqFail(2, 20, 21, history.ReasonHeld)
		}, []span{{1, 1, 22, "end-of-history"}}},
		{"a nested acquire on a lock that is not reentrant", false, false, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(1, 2, 3, "a")
			b.rel(1, 5, 6, "a", history.OK, "")
			b.rel(1, 7, 8, "a", history.OK, "a")
		}, []span{{1, 1, 5, "release"}}},
		{"reentrant: the last release ends the hold", true, false, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(1, 2, 3, "a")
			b.rel(1, 5, 6, "a", history.OK, "")
			b.rel(1, 7, 8, "a", history.OK, "a")
		}, []span{{1, 1, 7, "release"}}},
		{"reentrant: a failed nested acquire, then one release", true, false, func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acqFail(1, 2, 3, history.ReasonError)
			b.rel(1, 5, 6, "a", history.OK, "a")
			b.acq(2, 9, 10, "b")
		}, []span{{1, 1, 5, "release"}, {2, 10, 11, "end-of-history"}}},
		{"process exit ends the hold", false, false, func(b *hb) {
			b.clientLife(1, 0, 4)
			b.acq(1, 0, 1, "a")
		}, []span{{1, 1, 4, "client-exit"}}},
		{"a restarted client starts afresh", false, false, func(b *hb) {
			b.clientLife(1, 0, 4)
			b.acq(1, 0, 1, "a")
			b.clientLife(1, 10, -1)
			b.acq(1, 11, 12, "b")
			b.rel(1, 15, 16, "b", history.OK, "b")
		}, []span{{1, 1, 4, "client-exit"}, {1, 12, 15, "release"}}},
		{"a crashed holder's hold ends when the kill is sent", false, false, func(b *hb) {
			b.clientLife(1, 0, 6)
			b.acq(1, 0, 1, "a")
			b.fault++
			b.add(4, history.Event{Type: history.FaultStart, Fault: "crash-client", FaultID: b.fault, Target: "client 1", Client: 1})
			b.add(6.5, history.Event{Type: history.FaultEnd, Fault: "crash-client", FaultID: b.fault, Target: "client 1", Client: 1})
			b.acq(2, 5, 5.5, "b") // the server freed the session's lock before the exit was seen
		}, []span{{1, 1, 4, "client-exit"}, {2, 5.5, 7.5, "end-of-history"}}},
		{"a hold in a second life ends with that life", false, false, func(b *hb) {
			b.clientLife(1, 0, 4)
			b.clientLife(1, 10, 30)
			b.acq(1, 11, 12, "b")
			b.acqFail(2, 40, 41, history.ReasonHeld)
		}, []span{{1, 12, 30, "client-exit"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.info.Reentrant = tt.reentrant
			b.info.ChecksValidity = tt.validity
			tt.build(b)
			var got []span
			for _, hd := range Holds(b.build(t)) {
				got = append(got, span{hd.Client, float64(hd.Start) / 1e6, float64(hd.End) / 1e6, hd.EndReason})
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestHoldsSorted: holds of many overlapping readers close out of order of
// their starts; Holds returns each of them once, sorted by start (then
// client).
func TestHoldsSorted(t *testing.T) {
	h, err := histgen.Generate(histgen.Config{Seed: 3, Clients: 50, Ops: 20_000, ReadWrite: true, Indeterminate: 0.02}).History()
	require.NoError(t, err)
	hs := Holds(h)
	require.NotEmpty(t, hs)
	require.True(t, slices.IsSortedFunc(hs, func(a, b Hold) int {
		if a.Start != b.Start {
			return cmpInt64(a.Start, b.Start)
		}
		return a.Client - b.Client
	}))
	seen := map[int]bool{}
	acquires := 0
	for _, hd := range hs {
		require.False(t, seen[hd.AcquireIndex], "hold of acquire %d twice", hd.AcquireIndex)
		seen[hd.AcquireIndex] = true
	}
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Op == history.Acquire && op.Type == history.OK {
			acquires++
		}
	}
	require.Equal(t, acquires, len(hs), "one hold per successful acquire (not reentrant)")
}
