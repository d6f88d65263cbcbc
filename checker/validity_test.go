package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestUsedAfterValidity(t *testing.T) {
	tests := []struct {
		name     string
		validity bool
		build    func(b *hb)
		want     int
		explain  string
	}{
		{name: "not checking validity: n/a", build: func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, true, 2, 500, history.OK)
		}},
		{name: "used in time", validity: true, build: func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, true, 2, 100, history.OK)
			b.rel(1, 120, 121, "a", history.OK, "a")
		}},
		{name: "within the slack", validity: true, build: func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, true, 2, 105, history.OK) // valid until 101, slack 5 ms
			b.rel(1, 120, 121, "a", history.OK, "a")
		}},
		{name: "declined after it: careful", validity: true, build: func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, false, 2, 500, history.Fail)
			b.rel(1, 501, 502, "a", history.OK, "a")
		}},
		{name: "written after it", validity: true, want: 1, build: func(b *hb) {
			b.faultAt("pause", "client 1", 3, 499)
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, false, 2, 3, history.OK)
			b.use(1, true, 4, 500, history.OK)
			b.rel(1, 501, 502, "a", history.OK, "a")
		}, explain: "client 1 wrote the resource at 500.0 ms, 0.40 s after its own validity for the lock ended (acquired at 1.0 ms, valid until 101.0 ms by its own account): a client that checks its validity must stop using the resource once it ends, and this one did not; client 1 was paused 0.00 s–0.50 s."},
		{name: "a hold without a validity", validity: true, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.use(1, true, 4, 500, history.OK)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.info.ChecksValidity = tt.validity
			tt.build(b)
			p, as := checkUsedAfterValidity(newFacts(b.build(t)), 5e6)
			if !tt.validity {
				require.Equal(t, Skipped, p.Status)
				return
			}
			require.Len(t, as, tt.want)
			require.Equal(t, tt.want, p.Count)
			if tt.want == 0 {
				require.Equal(t, Pass, p.Status)
				return
			}
			require.Equal(t, Fail, p.Status)
			require.Equal(t, KindUsedAfterValidity, as[0].Kind)
			require.Equal(t, tt.explain, as[0].Explanation)
		})
	}
}

func TestCheckThenAct(t *testing.T) {
	tests := []struct {
		name    string
		build   func(b *hb)
		kind    Kind // of the one anomaly
		explain string
	}{
		{name: "paused after its check, while the write was in flight", kind: KindCheckThenAct, build: func(b *hb) {
			b.checkThenActGap()
		}, explain: "client 1 found its lease valid at 50.0 ms (51.0 ms left), was paused between that check and its write (50.0 ms–450.0 ms); client 2 acquired the lock at 201.0 ms; client 1's write landed at 450.0 ms, 0.35 s after its validity ended: the check-then-act gap. No check in the client closes it (a lease can run out between any check and the use it guards); only a fencing token checked by the resource does."},
		{name: "paused right after the grant: a client bug", kind: KindUsedAfterValidity, build: func(b *hb) {
			b.pauseAt("after-grant", 2, 450)
			b.acqValid(1, 0, 1, "a", 100)
			b.use(1, true, 451, 452, history.OK)
			b.rel(1, 453, 454, "a", history.Fail, "-")
		}},
		{name: "a write asked for after the validity ended is a client bug, paused at after-check or not", kind: KindUsedAfterValidity, build: func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.pauseAt("after-check", 151, 450)
			b.use(1, true, 150, 450, history.OK)
			b.rel(1, 451, 452, "a", history.Fail, "-")
		}},
		{name: "a pause at after-check of an earlier write does not excuse a later one", kind: KindUsedAfterValidity, build: func(b *hb) {
			b.acqValid(1, 0, 1, "a", 100)
			b.pauseAt("after-check", 10, 20)
			b.use(1, true, 9, 20, history.OK)
			b.use(1, true, 400, 401, history.OK)
			b.rel(1, 453, 454, "a", history.Fail, "-")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.info.ChecksValidity = true
			tt.build(b)
			p, as := checkUsedAfterValidity(newFacts(b.build(t)), 5e6)
			require.Len(t, as, 1)
			require.Equal(t, tt.kind, as[0].Kind)
			if tt.kind == KindCheckThenAct {
				require.Equal(t, Pass, p.Status, "the gap is no client bug")
				require.Zero(t, p.Count)
				require.Contains(t, p.Detail, "check-then-act gap")
				require.Equal(t, tt.explain, as[0].Explanation)
				return
			}
			require.Equal(t, Fail, p.Status)
			require.Equal(t, 1, p.Count)
		})
	}
}
