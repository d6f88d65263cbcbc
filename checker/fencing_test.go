package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestFencing(t *testing.T) {
	type w struct {
		client int
		typ    history.Type
		tok    int64 // -1: none
	}
	tests := []struct {
		name   string
		writes []w
		status Status
		kinds  []Kind
	}{
		{name: "no tokens", writes: []w{{1, history.OK, -1}, {2, history.OK, -1}}, status: Skipped},
		{name: "rising tokens", writes: []w{{1, history.OK, 1}, {2, history.OK, 2}, {2, history.OK, 2}, {1, history.OK, 5}}, status: Pass},
		{name: "stale write rejected", writes: []w{{1, history.OK, 1}, {2, history.OK, 2}, {1, history.Fail, 1}},
			status: Pass, kinds: []Kind{KindStaleWriteRejected}},
		{name: "stale write accepted", writes: []w{{1, history.OK, 1}, {2, history.OK, 3}, {1, history.OK, 1}, {3, history.OK, 2}},
			status: Fail, kinds: []Kind{KindStaleWriteAccepted, KindStaleWriteAccepted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			v := int64(0)
			for i, x := range tt.writes {
				call := float64(10 * i)
				if x.typ == history.OK {
					v++
				}
				b.write(x.client, call, call+1, x.typ, v, v-1, x.tok)
			}
			h := b.build(t)
			p, as := checkFencing(newFacts(h))
			require.Equal(t, tt.status, p.Status)
			var got []Kind
			for _, a := range as {
				got = append(got, a.Kind)
				require.Len(t, a.Clients, 2)
			}
			require.Equal(t, tt.kinds, got)
			require.Equal(t, len(as), p.Count)
		})
	}
}

func TestFencingExplanation(t *testing.T) {
	b := newHB()
	b.write(2, 1000, 1100, history.OK, 1, 0, 8)
	b.write(1, 5000, 5200, history.OK, 2, 1, 7)
	h := b.build(t)
	_, as := checkFencing(newFacts(h))
	require.Len(t, as, 1)
	require.Equal(t, "the resource accepted client 1's write with token 7 at 5.20 s although client 2 had already written with token 8 at 1.10 s.", as[0].Explanation)
}
