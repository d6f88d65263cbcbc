package reports

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// TestExcerptPickerBounded: the picker, which holds a bounded number of
// events, shows the same rows as choosing among all the events of the
// span at once (referenceRows: the excerpt as it was chosen before), on
// random spans of up to 5000 events with many of the anomaly's own and
// many ties in distance.
func TestExcerptPickerBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 17))
	for round := range 300 {
		a := checker.Anomaly{Clients: []int{1 + rng.IntN(3)}, Start: 1000, Ops: []int64{int64(rng.IntN(50))}}
		n := rng.IntN(5000)
		if round%3 == 0 {
			n = rng.IntN(2 * maxExcerptRows)
		}
		events := make([]history.Event, n)
		for i := range events {
			events[i] = history.Event{Seq: int64(i), Time: int64(rng.IntN(2000)), Client: rng.IntN(8), OpID: int64(rng.IntN(400))}
		}
		p := newExcerptPicker(a)
		for i := range events {
			p.add(&events[i])
		}
		ev := p.view(nil)
		require.Equal(t, n, ev.Total)
		var got []int64
		for _, r := range ev.Rows {
			got = append(got, r.Seq)
		}
		require.Equal(t, referenceRows(events, a), got, "round %d, %d events", round, n)
	}
}

// referenceRows is the excerpt's choice over all events at once: every
// event when at most maxExcerptRows, else the anomaly's own first, the
// closest to its start (a stable sort of the rest), in file order.
func referenceRows(events []history.Event, a checker.Anomaly) []int64 {
	hot, involved := map[int64]bool{}, map[int]bool{0: true}
	for _, id := range a.Ops {
		hot[id] = true
	}
	for _, c := range a.Clients {
		involved[c] = true
	}
	closest := func(idx []int, n int) []int {
		by := append([]int(nil), idx...)
		sort.SliceStable(by, func(i, j int) bool {
			return absDiff(events[by[i]].Time, a.Start) < absDiff(events[by[j]].Time, a.Start)
		})
		return by[:min(n, len(by))]
	}
	var keep, pri, rest []int
	for i := range events {
		keep = append(keep, i)
		if involved[events[i].Client] || hot[events[i].OpID] {
			pri = append(pri, i)
		} else {
			rest = append(rest, i)
		}
	}
	if len(keep) > maxExcerptRows {
		if len(pri) >= maxExcerptRows {
			keep = closest(pri, maxExcerptRows)
		} else {
			keep = append(pri, closest(rest, maxExcerptRows-len(pri))...)
		}
	}
	sort.Ints(keep)
	var seqs []int64
	for _, i := range keep {
		seqs = append(seqs, events[i].Seq)
	}
	return seqs
}
