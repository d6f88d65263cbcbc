package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/history"
)

// TestProvenDoubleGrant: two grants each returned while the other surely
// held the lock prove the history not linearizable; a release that may
// have freed the first, or a lease that may have run out, or a lost
// release naming no owner, takes the proof away.
func TestProvenDoubleGrant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lease  bool
		build  func(b *hb)
		proven bool
	}{
		{name: "second grant under the first, no release", proven: true, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 2, 3, "b")
			b.rel(1, 10, 11, "a", history.OK, "a")
			b.rel(2, 12, 13, "b", history.OK, "b")
		}},
		{name: "the first holder's release invoked before the second grant returned", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 2, 5, "a", history.OK, "a")
			b.acq(2, 3, 4, "b")
			b.rel(2, 12, 13, "b", history.OK, "b")
		}},
		{name: "a lost release of the first holder naming no owner", build: func(b *hb) {
			b.rel(1, 0, 0.5, "", history.Info, "")
			b.acq(1, 1, 2, "a")
			b.acq(2, 3, 4, "b")
			b.rel(1, 10, 11, "a", history.OK, "a")
		}},
		{name: "lease: the second grant within the first lease", lease: true, proven: true, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 20, 21, "b")
			b.rel(1, 60, 61, "a", history.OK, "a")
		}},
		{name: "lease: the second grant after the first lease may have run out", lease: true, build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.acq(2, 96, 97, "b")
			b.rel(1, 120, 121, "a", history.Fail, "")
		}},
		{name: "grants far apart", build: func(b *hb) {
			b.acq(1, 0, 1, "a")
			b.rel(1, 2, 3, "a", history.OK, "a")
			b.acq(2, 4, 5, "b")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHB()
			if tc.lease {
				b.info.Lease, b.info.TTLMillis = true, 100
			}
			tc.build(b)
			h := b.build(t)
			ops, _, m := prepareLock(h, int64(5*time.Millisecond))
			d, ok := provenDoubleGrant(ops, m)
			require.Equal(t, tc.proven, ok)
			if ok {
				an := d.anomaly(ops, h.Ops, h, m)
				require.Equal(t, KindNonLinearizable, an.Kind)
				require.Len(t, an.Ops, 2)
				require.Contains(t, an.Explanation, "Neither grant can come first")
				// The exact engines agree: not linearizable.
				p, _ := checkLinearizable(newFacts(h), DefaultOptions())
				require.Equal(t, Fail, p.Status, p.Detail)
			}
		})
	}
}

// TestProvenDoubleGrantTimesReadApart: grants a fraction of a millisecond
// apart late in a run are explained with times that read apart
// ("acquire (ok, 1.47025 s–1.47030 s) ... returned ok at 1.47020 s"), not
// all as 1.47 s.
func TestProvenDoubleGrantTimesReadApart(t *testing.T) {
	b := newHB()
	b.info.Lease, b.info.TTLMillis = true, 50
	b.acq(1, 1470.1, 1470.2, "a")
	b.acq(2, 1470.25, 1470.3, "b")
	b.rel(1, 1480, 1481, "a", history.OK, "a")
	b.rel(2, 1490, 1491, "b", history.OK, "b")
	h := b.build(t)
	ops, _, m := prepareLock(h, int64(5*time.Millisecond))
	d, ok := provenDoubleGrant(ops, m)
	require.True(t, ok)
	an := d.anomaly(ops, h.Ops, h, m)
	require.Contains(t, an.Explanation, "client 1's acquire (ok, 1.47010 s–1.47020 s)")
	require.Contains(t, an.Explanation, "client 2's acquire returned ok at 1.47030 s")
	require.Equal(t, 2, decimalsFor(1_470_000_000, 1_480_000_000, history.Never))
	require.Equal(t, 4, decimalsFor(1_470_100_000, 1_470_200_000))
	require.Equal(t, "12.35 ms", atD(12_345_678, 5))
}

// TestProvenDoubleGrantNeverOnValid: on valid histories of issue 17's
// shape (and the other generated ones) the proof never fires.
func TestProvenDoubleGrantNeverOnValid(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		for _, lost := range []float64{0.01, 0.05} {
			h, _ := lostShapeHistory(t, lostShape(seed, 5_000, 50, lost, 0))
			ops, _, m := prepareLock(h, int64(5*time.Millisecond))
			_, ok := provenDoubleGrant(ops, m)
			require.False(t, ok, "seed %d, %.0f%% lost", seed, 100*lost)
		}
	}
}

// TestProvenDoubleGrantFindsInjected: double grants injected into issue
// 17's shape are proven (the holder stalls until after the grant returns,
// within its lease), and the property fails within the sweep's budget.
func TestProvenDoubleGrantFindsInjected(t *testing.T) {
	found := 0
	for seed := uint64(1); seed <= 10; seed++ {
		h, inj := lostShapeHistory(t, lostShape(seed, 5_000, 50, 0.05, 3))
		if len(inj.DoubleHolders) == 0 {
			continue
		}
		ops, _, m := prepareLock(h, int64(5*time.Millisecond))
		if _, ok := provenDoubleGrant(ops, m); ok {
			found++
		}
		opts := DefaultOptions()
		opts.SearchBudget = time.Second
		p, _ := checkLinearizable(newFacts(h), opts)
		require.Equal(t, Fail, p.Status, "seed %d: %s", seed, p.Detail)
	}
	require.Positive(t, found)
}
