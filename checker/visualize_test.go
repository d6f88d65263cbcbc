package checker

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/histgen"
)

// TestWindowSound: a window that starts at a free point (freePoints) and
// is cut at an invocation is, searched from a free lock, linearizable
// exactly when the history up to its end is (the part before the window
// being linearizable), on random histories with and without violations,
// leases and lost answers.
func TestWindowSound(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 40
	}
	rng := rand.New(rand.NewPCG(6, 6))
	compared, illegal := 0, 0
	for i := range n {
		cfg := histgen.Config{
			Seed: uint64(i), Clients: 2 + rng.IntN(3), Ops: 60 + rng.IntN(60),
			Indeterminate: []float64{0, 0, 0.03}[rng.IntN(3)],
			Lease:         rng.IntN(2) == 0, TTL: 5 * time.Millisecond,
			DoubleHolders: rng.IntN(3), ForeignReleases: rng.IntN(2),
		}
		h, err := histgen.Generate(cfg).History()
		require.NoError(t, err)
		ops, _, m := prepareLock(h, int64(DefaultOptions().Slack))
		if len(ops) < 4 {
			continue
		}
		model := m.porcupine(m.ow)
		check := func(win []lockOp, to int64) porcupine.CheckResult {
			w := slices.Clone(win)
			cutAt(w, to)
			return porcupine.CheckOperationsTimeout(model, porcupineOps(w), 10*time.Second)
		}
		free := freePoints(ops, len(ops)-1)
		for k := 0; k < 3; k++ {
			var starts []int
			for s, ok := range free {
				if ok && s > 0 {
					starts = append(starts, s)
				}
			}
			if len(starts) == 0 {
				break
			}
			s := starts[rng.IntN(len(starts))]
			e := s + 1 + rng.IntN(len(ops)-s)
			to := history.Never
			if e < len(ops) {
				to = ops[e].call
			}
			if check(ops[:s], history.Never) != porcupine.Ok {
				continue // the window is only claimed given a legal past
			}
			whole, win := check(ops[:e], to), check(ops[s:e], to)
			require.NotEqual(t, porcupine.Unknown, whole)
			require.Equal(t, whole, win, "seed %d: window [%d,%d) of %d", i, s, e, len(ops))
			compared++
			if whole == porcupine.Illegal {
				illegal++
			}
		}
	}
	t.Logf("%d windows compared, %d illegal", compared, illegal)
	require.Greater(t, compared, n/2)
	require.Greater(t, illegal, 0, "no illegal window: the test proves little")
}

// TestPorcupineWindowFocus: a long history with one double grant late in
// it gets a window of at most MaxOps around it, starting on a free lock,
// and porcupine finds that window illegal; without a focus, the first
// MaxOps operations.
func TestPorcupineWindowFocus(t *testing.T) {
	b := newHB()
	t0 := 0.0
	for k := range 300 {
		c := 1 + k%3
		owner := "o" + string(rune('a'+k%26)) + string(rune('a'+k/26))
		b.acq(c, t0, t0+0.5, owner)
		b.rel(c, t0+1, t0+1.5, owner, history.OK, owner)
		t0 += 2
	}
	// Client 2 is granted the lock while client 1 holds it.
	b.acq(1, t0, t0+0.5, "x1")
	b.acq(2, t0+1, t0+1.5, "x2")
	b.rel(2, t0+2, t0+2.5, "x2", history.OK, "x2")
	b.rel(1, t0+3, t0+3.5, "x1", history.OK, "x1")
	t0 += 4
	for k := range 100 {
		owner := "y" + string(rune('a'+k%26)) + string(rune('a'+k/26))
		b.acq(3, t0, t0+0.5, owner)
		b.rel(3, t0+1, t0+1.5, owner, history.OK, owner)
		t0 += 2
	}
	h := b.build(t)
	r := Check(h, DefaultOptions())
	require.Equal(t, Unsafe, r.Verdict)
	var a *Anomaly
	for i := range r.Anomalies {
		if r.Anomalies[i].Kind == KindNonLinearizable {
			a = &r.Anomalies[i]
		}
	}
	require.NotNil(t, a)

	v := PorcupineWindow(h, ViewOptions{MaxOps: 100, FocusFrom: a.Start, FocusTo: a.End})
	require.Empty(t, v.Skipped)
	require.Equal(t, 804, v.LockOps)
	require.False(t, v.Whole)
	require.True(t, v.Focused)
	require.LessOrEqual(t, len(v.Ops), 100)
	require.Greater(t, v.From, int64(0))
	require.LessOrEqual(t, v.From, a.Start)
	require.Greater(t, v.To, a.End)
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(v.Model, v.Ops, 10*time.Second))
	op, ok := v.Ops[0].Metadata.(*history.Operation)
	require.True(t, ok)
	require.Equal(t, v.From, op.Call)

	v = PorcupineWindow(h, ViewOptions{MaxOps: 100, FocusTo: -1})
	require.False(t, v.Focused)
	require.Equal(t, int64(0), v.From)
	require.LessOrEqual(t, len(v.Ops), 100)
	require.Greater(t, len(v.Ops), 80)
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(v.Model, v.Ops, 10*time.Second))

	v = PorcupineWindow(h, ViewOptions{MaxOps: 1000, FocusTo: -1})
	require.True(t, v.Whole)
	require.Len(t, v.Ops, 804)
}
