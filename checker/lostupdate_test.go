package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

func TestLostUpdate(t *testing.T) {
	type w struct {
		client      int
		typ         history.Type
		value, prev int64
	}
	tests := []struct {
		name     string
		start    int64
		writes   []w
		noPrev   bool
		status   Status
		final    int64
		victims  [][]int // clients of each anomaly
		explains []string
	}{
		{name: "no writes", status: Skipped},
		{name: "increments", start: 10, status: Pass, final: 13,
			writes: []w{{1, history.OK, 11, 10}, {2, history.OK, 12, 11}, {1, history.OK, 13, 12}}},
		{name: "rejected writes change nothing", status: Pass, final: 2,
			writes: []w{{1, history.OK, 1, 0}, {2, history.Fail, 0, 0}, {1, history.OK, 2, 1}}},
		{name: "one overwrite", status: Fail, final: 2,
			writes:  []w{{1, history.OK, 1, 0}, {2, history.OK, 2, 1}, {1, history.OK, 2, 2}},
			victims: [][]int{{1, 2}}, explains: []string{"client 1 read 1 and wrote 2", "replacing 2, which client 2 had written", "1 increment lost"}},
		{name: "victim is the last other writer", status: Fail, final: 3,
			writes:  []w{{1, history.OK, 1, 0}, {2, history.OK, 2, 1}, {2, history.OK, 3, 2}, {2, history.OK, 3, 3}},
			victims: [][]int{{2, 1}}, explains: []string{"which client 1 had written", "1 increment lost"}},
		{name: "three lost at once", status: Fail, final: 2,
			writes:  []w{{1, history.OK, 1, 0}, {2, history.OK, 2, 1}, {2, history.OK, 3, 2}, {2, history.OK, 4, 3}, {1, history.OK, 2, 4}},
			victims: [][]int{{1, 2}}, explains: []string{"3 increments lost"}},
		{name: "without prev, the total decides", noPrev: true, status: Fail, final: 2,
			writes:  []w{{1, history.OK, 1, 0}, {2, history.OK, 2, 0}, {1, history.OK, 2, 0}},
			victims: [][]int{{1}}, explains: []string{"1 increment was lost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHB()
			b.info.ResourceStart = tt.start
			for i, x := range tt.writes {
				call := float64(10 * i)
				id := b.write(x.client, call, call+1, x.typ, x.value, x.prev, -1)
				if tt.noPrev {
					for j := range b.evs {
						if b.evs[j].OpID == id {
							b.evs[j].Prev = nil
						}
					}
				}
			}
			h := b.build(t)
			p, as, final := checkLostUpdate(newFacts(h))
			require.Equal(t, tt.status, p.Status)
			if tt.status != Skipped {
				require.Equal(t, tt.final, final)
			}
			require.Len(t, as, len(tt.victims))
			for i, a := range as {
				require.Equal(t, KindLostUpdate, a.Kind)
				require.Equal(t, tt.victims[i], a.Clients)
			}
			for _, s := range tt.explains {
				require.Contains(t, as[0].Explanation, s)
			}
		})
	}
}

func TestResourceWritesOrder(t *testing.T) {
	b := newHB()
	b.write(1, 0, 50, history.OK, 2, 1, -1) // invoked first, applied last
	b.write(2, 10, 20, history.OK, 1, 0, -1)
	b.o(3, history.Write, 30, -1, history.Info, nil) // never answered: never applied
	h := b.build(t)
	ws := newFacts(h).writes
	require.Len(t, ws, 2)
	require.Equal(t, 2, h.Ops[ws[0]].Client)
	require.Equal(t, 1, h.Ops[ws[1]].Client)
}
