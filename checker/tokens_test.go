package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestTokenOrder(t *testing.T) {
	acqTok := func(b *hb, c int, call, ret float64, owner string, tok int64) {
		b.o(c, history.Acquire, call, ret, history.OK, func(_, d *history.Event) { d.Owner, d.Token = owner, &tok })
	}
	tests := []struct {
		name  string
		build func(b *hb)
		want  map[Kind]int
		skip  bool
	}{
		{"increasing tokens", func(b *hb) {
			acqTok(b, 1, 0, 1, "a", 1)
			b.rel(1, 2, 3, "a", history.OK, "a")
			acqTok(b, 2, 4, 5, "b", 2)
			b.rel(2, 6, 7, "b", history.OK, "b")
		}, map[Kind]int{}, false},
		{"a token granted twice (a failover lost the counter's last increment)", func(b *hb) {
			acqTok(b, 1, 0, 1, "a", 7)
			b.rel(1, 2, 3, "a", history.OK, "a")
			acqTok(b, 2, 4, 5, "b", 7)
			b.rel(2, 6, 7, "b", history.OK, "b")
		}, map[Kind]int{KindTokenReused: 1}, false},
		{"a lower token after an earlier grant returned (a restarted counter)", func(b *hb) {
			acqTok(b, 1, 0, 1, "a", 9)
			b.rel(1, 2, 3, "a", history.OK, "a")
			acqTok(b, 2, 4, 5, "b", 1)
			b.rel(2, 6, 7, "b", history.OK, "b")
		}, map[Kind]int{KindTokenRegressed: 1}, false},
		{"concurrent acquires may be granted in either order", func(b *hb) {
			acqTok(b, 1, 0, 5, "a", 2)
			b.rel(1, 6, 7, "a", history.OK, "a")
			acqTok(b, 2, 1, 8, "b", 1) // invoked before a's grant returned
			b.rel(2, 9, 10, "b", history.OK, "b")
		}, map[Kind]int{}, false},
		{"a reentrant acquire inside a hold is not a new grant", func(b *hb) {
			acqTok(b, 1, 0, 1, "a", 3)
			acqTok(b, 1, 2, 3, "a", 3)
			b.rel(1, 4, 5, "a", history.OK, "")
			b.rel(1, 6, 7, "a", history.OK, "a")
		}, map[Kind]int{}, false},
		{"no tokens", func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 2, 3, "a", history.OK, "a")
		}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.info.Reentrant = true
			tt.build(b)
			p, as := checkTokenOrder(newFacts(b.build(t)))
			if tt.skip {
				require.Equal(t, Skipped, p.Status)
				return
			}
			got := map[Kind]int{}
			for _, a := range as {
				got[a.Kind]++
				require.NotEmpty(t, a.Explanation)
				require.Len(t, a.Clients, 2)
			}
			require.Equal(t, tt.want, got)
			if len(tt.want) > 0 {
				require.Equal(t, Fail, p.Status)
			} else {
				require.Equal(t, Pass, p.Status)
			}
		})
	}
}

// A fenced run whose lock reused a token is unsafe even though the
// resource happened to show no damage: fencing's promise broke.
func TestTokenReuseIsAViolationInFencedRuns(t *testing.T) {
	b := newHB()
	b.info.Fence = true
	tok := int64(5)
	b.o(1, history.Acquire, 0, 1, history.OK, func(_, d *history.Event) { d.Owner, d.Token = "a", &tok })
	b.rel(1, 2, 3, "a", history.OK, "a")
	b.o(2, history.Acquire, 4, 5, history.OK, func(_, d *history.Event) { d.Owner, d.Token = "b", &tok })
	b.rel(2, 6, 7, "b", history.OK, "b")
	b.cycles(10, 10)
	r := Check(b.build(t), DefaultOptions())
	require.Equal(t, Unsafe, r.Verdict, r.Why)
	require.Equal(t, SeverityViolation, r.Anomalies[0].Severity)
	require.Equal(t, KindTokenReused, r.Anomalies[0].Kind)
}
